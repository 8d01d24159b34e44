"""The events table: columns and codes, older files upgraded, what kernel/op/API/step names mean."""
