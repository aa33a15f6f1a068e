"""Tables (CSV, Markdown, LaTeX), figures (PDF, PNG) and numbers (numbers.json, numbers.tex)."""
