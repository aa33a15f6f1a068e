# Outputs shown by `snakemake --report report.html`: tables as CSV, figures as PNG, each with a
# caption file report/<name>.rst (paths relative to rules/, where the stage files live).
# Used by rules/analysis.smk and rules/validation.smk.


def table_outputs(stem, caption, category="Tables"):
    """<stem>.csv (shown in the report with `caption`), .md, .tex: the order scripts rely on."""
    # (a line may not start with `report(`: Snakemake parses that as the report keyword)
    csv = report(f"{stem}.csv", caption=caption, category=category)
    return [csv, f"{stem}.md", f"{stem}.tex"]


def figure_outputs(stem, caption, category="Figures"):
    """<stem>.pdf, <stem>.png (shown in the report with `caption`)."""
    return [f"{stem}.pdf", report(f"{stem}.png", caption=caption, category=category)]
