"""Many ranks: a folder of rank traces, and its DuckDB dataset."""
