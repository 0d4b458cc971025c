"""A template privreg plugin: a noisy histogram mechanism and a workflow using it."""
