//! Dev-only helpers shared by Strata tests.
