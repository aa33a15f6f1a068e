# Outputs shown by `snakemake --report report.html`: tables as CSV, figures as PNG. Every such
# rule has `params: caption`, the text of report/artifact.rst (the artifact's caption from its
# kind module, with its paper ids).


def table_outputs(stem, category):
    """<stem>.csv (shown in the report), .md, .tex: the order scripts rely on."""
    # (a line may not start with `report(`: Snakemake parses that as the report keyword)
    csv = report(f"{stem}.csv", caption="../report/artifact.rst", category=category, subcategory="tables")
    return [csv, f"{stem}.md", f"{stem}.tex"]


def figure_outputs(stem, category):
    """<stem>.pdf, <stem>.png (shown in the report)."""
    return [f"{stem}.pdf", report(f"{stem}.png", caption="../report/artifact.rst", category=category,
                                  subcategory="figures")]
