"""Rich renderables for the terminal, fitted to its width."""
