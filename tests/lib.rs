//! Shared helpers of the workspace-level end-to-end tests.
