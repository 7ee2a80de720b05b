-- In-process compatibility (docs/flagd.md#compatibility): with require_in_process_compatible a
-- flag write that adds targeting flagd's JsonLogic cannot express is refused (400), and so is a
-- cohort change that would do that to a flag naming the cohort.
ALTER TABLE projects ADD COLUMN require_in_process_compatible boolean NOT NULL DEFAULT false;
