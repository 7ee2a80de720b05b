-- In-process compatibility (docs/flagd.md#compatibility): with require_in_process_compatible a
-- flag write whose targeting cannot be translated to flagd's JsonLogic is refused (400), and so
-- is a cohort change that would make one of the project's flags untranslatable.
ALTER TABLE projects ADD COLUMN require_in_process_compatible boolean NOT NULL DEFAULT false;
