"""Throughput and scaling measurements; each module prints a Markdown table."""
