"""One package per custom TFX component (spec + component, a thin executor, plain modules), plus shared/."""
