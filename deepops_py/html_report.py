"""The acceptance report as one self-contained HTML page (``deepops validate --report FILE``).

The page is built from a ``ValidationReport`` alone: inline CSS, and plots
drawn here as inline SVG. It loads nothing (no script, font, stylesheet or
image; its Content-Security-Policy forbids it as well), so it can be mailed or
archived as it is. Everything that comes from the cluster (node names,
details, GPU models, versions) is HTML-escaped. Rendering is pure: the same
report, cluster name and date give the same page.

Sections: header (cluster, run, date, verdict, a SIMULATED banner when any
result came from stand-in tools), versions, the verdict matrix (check x node),
NCCL bus bandwidth against message size (one plot per node, threshold dashed),
the DCGM diagnostic matrix (test x GPU, per node) and burn-in figures per GPU.
A section without data says so in one line.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable

from deepops_py.reports import BURNIN, DCGM, FAIL, NCCL, NOT_APPLICABLE, PASS, CheckResult, ValidationReport

UNKNOWN = "unknown"
NONE = "\u2014"  # a figure that was not measured
CLUSTER_WIDE = "cluster"  # the column of results that belong to no single node

# The plot's geometry, in SVG user units.
_WIDTH, _HEIGHT = 640, 320
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 24, 20, 52
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")

_CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px auto;
       max-width: 1180px; padding: 0 16px; color: #1f2328; background: #fff; line-height: 1.4; }
h1 { font-size: 1.6em; margin: 0 0 8px; } h2 { border-bottom: 1px solid #d0d7de; padding-bottom: 4px; margin-top: 32px; }
h3 { margin: 16px 0 6px; font-size: 1.05em; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 0.92em; }
th, td { border: 1px solid #d0d7de; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; margin: 8px 0; }
dl.meta dt { font-weight: 600; } dl.meta dd { margin: 0; }
.verdict { display: inline-block; padding: 2px 12px; border-radius: 4px; font-weight: 700; }
.pass { background: #dafbe1; color: #116329; } .fail { background: #ffebe9; color: #a40e26; font-weight: 600; }
.na, .skip, .empty { background: #f6f8fa; color: #57606a; } .warn { background: #fff8c5; color: #7d4e00; }
.banner { border: 2px solid #bf8700; background: #fff8c5; color: #4d2d00; padding: 10px 14px; margin: 12px 0;
          border-radius: 6px; font-size: 1.05em; }
.tag { display: inline-block; font-size: 0.75em; font-weight: 600; color: #7d4e00; background: #fff8c5;
       border: 1px solid #d4a72c; border-radius: 3px; padding: 0 4px; margin-left: 4px; text-transform: uppercase; }
.none { color: #57606a; font-style: italic; }
td[title] { cursor: help; }
figure { margin: 8px 0 20px; } figcaption { font-size: 0.92em; margin-bottom: 4px; }
svg.plot { background: #fff; border: 1px solid #d0d7de; max-width: 100%; height: auto; }
svg.plot text { font-family: inherit; font-size: 11px; fill: #1f2328; }
svg.plot .grid { stroke: #eaeef2; stroke-width: 1; } svg.plot .axis { stroke: #57606a; stroke-width: 1; }
svg.plot .curve { fill: none; stroke: #0969da; stroke-width: 2; } svg.plot .point { fill: #0969da; }
svg.plot .threshold { stroke: #cf222e; stroke-width: 1.5; stroke-dasharray: 6 4; }
svg.plot text.threshold-label { fill: #cf222e; } svg.plot text.watermark { fill: #bf8700; opacity: 0.18;
  font-size: 44px; font-weight: 700; }
nav a { margin-right: 12px; }
@media print { nav { display: none; } h2 { break-after: avoid; } figure, table { break-inside: avoid; } }
"""


def render_html(report: ValidationReport, *, cluster_name: str, generated_at: str) -> str:
    """The whole page for ``report`` of the cluster ``cluster_name``, dated ``generated_at``."""
    verdict = "PASS" if report.ok else "FAIL"
    sections = [
        _header(report, cluster_name, generated_at, verdict),
        _versions(report),
        _verdicts(report),
        _nccl(report),
        _dcgm(report),
        _burnin(report),
    ]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        # Nothing may be fetched: the page is self-contained by construction, and this says so to the browser.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="deepops validate">\n'
        f"<title>{_e(verdict)} \u2014 deepops validate \u2014 {_e(cluster_name)}</title>\n"
        f"<style>{_CSS}</style>\n</head>\n<body>\n" + "\n".join(sections) + "\n</body>\n</html>\n"
    )


# --------------------------------------------------------------------------
# sections


def _header(report: ValidationReport, cluster_name: str, generated_at: str, verdict: str) -> str:
    summary = report.summary()
    counts = f"{summary['passed']}/{summary['checks']} passed, {summary['failed']} failed, {summary['not_applicable']} not applicable"
    rows = [
        ("Cluster", _e(cluster_name)),
        ("Run", _e(report.run_id)),
        ("Generated", _e(generated_at)),
        ("Run status", _e(report.run_status)),
        ("Verdict", f'<span class="verdict {"pass" if report.ok else "fail"}" id="verdict">{verdict}</span>'),
        ("Results", _e(counts)),
        ("Skipped checks", _e(", ".join(report.skipped) or "none")),
        ("Artifacts", f"<code>{_e(report.artifacts or UNKNOWN)}</code>"),
    ]
    meta = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in rows)
    banner = ""
    if report.simulated:
        banner = (
            '<div class="banner" id="simulated" role="note"><strong>SIMULATED</strong> \u2014 '
            f"{len(report.simulated)} of {len(report.checks)} results come from the virtual cluster's stand-in tools "
            "(simulated GPUs), not from real hardware. Their figures prove the tooling, not the machines.</div>"
        )
    nav = "".join(
        f'<a href="#{anchor}">{title}</a>'
        for anchor, title in (("versions", "Versions"), ("verdicts", "Verdicts"), ("nccl", "NCCL"),
                              ("dcgm", "DCGM"), ("burnin", "Burn-in"))
    )
    return (
        f'<header>\n<h1>Acceptance report: {_e(cluster_name)}</h1>\n{banner}\n'
        f'<dl class="meta">{meta}</dl>\n<nav>{nav}</nav>\n</header>'
    )


def _versions(report: ValidationReport) -> str:
    versions = report.versions
    # The nodes the role found versions on, and every single node a result names.
    named = (node for node in _nodes(report.checks) if node and "," not in node)
    nodes = sorted({*versions["nodes"], *named})
    parts = [f'<section id="versions">\n<h2>Versions</h2>\n<p>Slurm: <strong>{_e(versions["slurm"] or UNKNOWN)}</strong></p>']
    if nodes:
        rows = "".join(
            f"<tr><td>{_e(node)}</td>"
            + "".join(f"<td>{_e(versions['nodes'].get(node, {}).get(key) or UNKNOWN)}</td>" for key in ("driver", "cuda", "nccl"))
            + "</tr>"
            for node in nodes
        )
        parts.append(f"<table><thead><tr><th>node</th><th>driver</th><th>CUDA</th><th>NCCL</th></tr></thead><tbody>{rows}</tbody></table>")
    else:
        parts.append('<p class="none">No node versions were recorded.</p>')
    return "\n".join(parts) + "\n</section>"


def _verdicts(report: ValidationReport) -> str:
    parts = ['<section id="verdicts">\n<h2>Verdicts</h2>']
    if not report.checks:
        parts.append('<p class="none">No check results were recorded.</p>')
        return "\n".join(parts) + "\n</section>"
    nodes = _nodes(report.checks)
    names = list(dict.fromkeys(check.check for check in report.checks))
    cells: dict[tuple[str, str], list[CheckResult]] = {}
    for check in report.checks:
        cells.setdefault((check.check, check.node), []).append(check)
    head = "".join(f"<th>{_e(node or CLUSTER_WIDE)}</th>" for node in nodes)
    rows = []
    for name in names:
        row = [f"<th>{_e(name)}</th>"]
        for node in nodes:
            results = cells.get((name, node))
            if not results:
                row.append(f'<td class="empty">{NONE}</td>')
                continue
            status = FAIL if any(r.failed for r in results) else PASS if any(r.passed for r in results) else NOT_APPLICABLE
            detail = "\n".join(r.detail for r in results if r.detail) or _status_text(status)
            tag = _SIMULATED_TAG if any(r.simulated for r in results) else ""
            row.append(f'<td class="{_status_class(status)}" title="{_e(detail)}">{_status_text(status)}{tag}</td>')
        rows.append("<tr>" + "".join(row) + "</tr>")
    parts.append(
        '<table class="matrix"><thead><tr><th>check</th>' + head + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    parts.append("<p>Hover over a result for its detail. Failures:</p>")
    failed = report.failed
    if failed:
        items = "".join(
            f"<li><strong>{_e(c.check)}</strong> on {_e(c.node or CLUSTER_WIDE)}"
            f"{_SIMULATED_TAG if c.simulated else ''}: {_e(c.detail or 'failed')}</li>"
            for c in failed
        )
        parts.append(f'<ul class="failures">{items}</ul>')
    else:
        parts.append('<p class="none">No check failed.</p>')
    return "\n".join(parts) + "\n</section>"


def _per_check_section(report: ValidationReport, check_name: str, anchor: str, title: str, nothing: str,
                       render: Callable[[CheckResult, str], list[str]]) -> str:
    """A section with one entry per result of CHECK_NAME (``render(result, node)`` -> its HTML parts),
    or NOTHING when the check recorded none."""
    parts = [f'<section id="{anchor}">\n<h2>{title}</h2>']
    results = [check for check in report.checks if check.check == check_name]
    if not results:
        parts.append(f'<p class="none">{nothing}</p>')
    for check in results:
        parts += render(check, check.node or CLUSTER_WIDE)
    return "\n".join(parts) + "\n</section>"


def _verdict_span(check: CheckResult) -> str:
    return f'<span class="verdict {_status_class(check.status)}">{_status_text(check.status)}</span>{_sim(check)}'


def _nccl(report: ValidationReport) -> str:
    return _per_check_section(report, NCCL, "nccl", "NCCL bus bandwidth", "No NCCL bandwidth was measured.", _nccl_entry)


def _nccl_entry(check: CheckResult, node: str) -> list[str]:
    m = check.measurements
    if not m or not m.get("curve"):
        return [f"<p><strong>{_e(node)}</strong>{_sim(check)}: no bandwidth curve recorded "
                f"({_status_text(check.status)}: {_e(check.detail or 'no detail')}).</p>"]
    gpus = f"{m['gpus']} \u00d7 " if m.get("gpus") else ""
    what = ", ".join(part for part in (f"{gpus}{m.get('model') or 'GPU'}", m.get("interconnect")) if part)
    threshold = f"threshold {_num(m['threshold_gbps'])} GB/s" if m.get("threshold_gbps") is not None else "no threshold"
    return [
        f"<figure><figcaption><strong>{_e(node)}</strong> \u2014 {_e(what)} \u2014 bus bandwidth "
        f"{_num(m['busbw_gbps'])} GB/s ({threshold}): {_verdict_span(check)}"
        f"</figcaption>\n{_nccl_plot(node, m, check.simulated)}</figure>"
    ]


def _dcgm(report: ValidationReport) -> str:
    return _per_check_section(report, DCGM, "dcgm", "DCGM diagnostics", "No DCGM diagnostics were run.", _dcgm_entry)


def _dcgm_entry(check: CheckResult, node: str) -> list[str]:
    m = check.measurements
    level = f" \u2014 level {m['level']}" if m else ""
    parts = [f"<h3>{_e(node)}{level}: {_verdict_span(check)}</h3>"]
    if not m or not m["tests"]:
        return parts + [f'<p class="none">No diagnostic matrix recorded ({_e(check.detail or "no detail")}).</p>']
    gpus = sorted({gpu for outcomes in m["tests"].values() for gpu in outcomes}, key=int)
    head = "".join(f"<th>GPU {_e(gpu)}</th>" for gpu in gpus)
    rows = "".join(
        f"<tr><th>{_e(test)}</th>"
        + "".join(_dcgm_cell(outcomes.get(gpu)) for gpu in gpus)
        + "</tr>"
        for test, outcomes in m["tests"].items()
    )
    return parts + [f'<table class="dcgm" data-node="{_e(node)}"><thead><tr><th>test</th>{head}</tr></thead>'
                    f"<tbody>{rows}</tbody></table>"]


def _burnin(report: ValidationReport) -> str:
    return _per_check_section(report, BURNIN, "burnin", "Burn-in", "No burn-in was run.", _burnin_entry)


def _burnin_entry(check: CheckResult, node: str) -> list[str]:
    parts = [f"<h3>{_e(node)}: {_verdict_span(check)}</h3>"]
    gpus = (check.measurements or {}).get("gpus") or []
    if not gpus:
        return parts + [f'<p class="none">No per-GPU figures recorded ({_e(check.detail or "no detail")}).</p>']
    rows = []
    for gpu in gpus:
        throttle = ", ".join(gpu["throttle"])
        rows.append(
            f"<tr><td>{gpu['index']}</td>"
            f'<td class="num">{_num(gpu["tflops"])}</td><td class="num">{_num(gpu["peak_tflops"])}</td>'
            f'<td class="num">{_percent(gpu["tflops"], gpu["peak_tflops"])}</td>'
            f'<td class="num">{_num(gpu["mem_bw_gbps"])}</td><td class="num">{_num(gpu["peak_mem_bw_gbps"])}</td>'
            f'<td class="num">{_percent(gpu["mem_bw_gbps"], gpu["peak_mem_bw_gbps"])}</td>'
            f'<td class="{"warn" if throttle else "pass"}">{_e(throttle or "none")}</td></tr>'
        )
    return parts + [
        f'<table class="burnin" data-node="{_e(node)}"><thead><tr><th>GPU</th><th>TFLOPS</th><th>peak</th><th>% of peak</th>'
        "<th>memory GB/s</th><th>peak</th><th>% of peak</th><th>throttling</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    ]


# --------------------------------------------------------------------------
# the NCCL plot: bus bandwidth (GB/s) against message size (bytes, log2)


def _nccl_plot(node: str, m: dict, simulated: bool) -> str:
    curve = m["curve"]
    threshold = m.get("threshold_gbps")
    x_low = math.floor(math.log2(curve[0][0]))
    x_high = math.ceil(math.log2(curve[-1][0]))
    if x_high == x_low:
        x_low, x_high = x_low - 1, x_high + 1
    top = max([busbw for _, busbw in curve] + ([threshold] if threshold is not None else []))
    y_step = _nice_step(top * 1.05 / 5) if top > 0 else 1.0
    y_high = y_step * max(1, math.ceil(top * 1.05 / y_step))
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def x(size: float) -> float:
        return _LEFT + (math.log2(size) - x_low) / (x_high - x_low) * plot_w

    def y(value: float) -> float:
        return _TOP + plot_h - value / y_high * plot_h

    out = [
        f'<svg class="plot" data-plot="nccl" data-node="{_e(node)}"'
        + (f' data-threshold="{threshold:g}"' if threshold is not None else "")
        + f' viewBox="0 0 {_WIDTH} {_HEIGHT}" width="{_WIDTH}" height="{_HEIGHT}" role="img"'
        f' aria-label="NCCL bus bandwidth against message size on {_e(node)}">',
        f"<title>NCCL bus bandwidth against message size on {_e(node)}</title>",
    ]
    if simulated:
        out.append(f'<text class="watermark" x="{_LEFT + plot_w / 2:.1f}" y="{_TOP + plot_h / 2 + 16:.1f}" '
                   'text-anchor="middle">SIMULATED</text>')
    x_step = max(1, math.ceil((x_high - x_low) / 8))
    for power in range(math.ceil(x_low / x_step) * x_step, x_high + 1, x_step):
        px = x(2**power)
        out.append(f'<line class="grid" x1="{px:.1f}" y1="{_TOP}" x2="{px:.1f}" y2="{_TOP + plot_h}"/>')
        out.append(f'<text x="{px:.1f}" y="{_TOP + plot_h + 16}" text-anchor="middle">{_human_bytes(power)}</text>')
    digits = next(d for d in (0, 1, 2, 3) if abs(y_step * 10**d - round(y_step * 10**d)) < 1e-9 or d == 3)
    for i in range(round(y_high / y_step) + 1):
        value = i * y_step
        py = y(value)
        out.append(f'<line class="grid" x1="{_LEFT}" y1="{py:.1f}" x2="{_LEFT + plot_w}" y2="{py:.1f}"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{_num(value, digits)}</text>')
    out.append(f'<line class="axis" x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_LEFT + plot_w}" y2="{_TOP + plot_h}"/>')
    out.append(f'<line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}"/>')
    out.append(f'<text x="{_LEFT + plot_w / 2:.1f}" y="{_HEIGHT - 10}" text-anchor="middle">message size (log scale)</text>')
    out.append(f'<text x="14" y="{_TOP + plot_h / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {_TOP + plot_h / 2:.1f})">bus bandwidth (GB/s)</text>')
    if threshold is not None:
        ty = y(threshold)
        out.append(f'<line class="threshold" x1="{_LEFT}" y1="{ty:.1f}" x2="{_LEFT + plot_w}" y2="{ty:.1f}"/>')
        out.append(f'<text class="threshold-label" x="{_LEFT + plot_w - 4}" y="{ty - 5:.1f}" text-anchor="end">'
                   f"threshold {_num(threshold)} GB/s</text>")
    points = " ".join(f"{x(size):.1f},{y(busbw):.1f}" for size, busbw in curve)
    out.append(f'<polyline class="curve" points="{points}"/>')
    for size, busbw in curve:
        out.append(f'<circle class="point" cx="{x(size):.1f}" cy="{y(busbw):.1f}" r="3">'
                   f"<title>{_bytes_label(size)}: {_num(busbw)} GB/s</title></circle>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``raw``."""
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(f * magnitude for f in (1, 2, 2.5, 5, 10) if f * magnitude >= raw * (1 - 1e-9))


def _human_bytes(power: int) -> str:
    """2**power bytes in binary units: 1 KiB, 8 MiB, 2 GiB."""
    unit = min(power // 10, len(_BYTE_UNITS) - 1)
    return f"{2 ** (power - 10 * unit)} {_BYTE_UNITS[unit]}"


def _bytes_label(size: int) -> str:
    power = math.log2(size)
    if power == int(power):
        return _human_bytes(int(power))
    unit = min(int(power) // 10, len(_BYTE_UNITS) - 1)
    return f"{size / 1024 ** unit:.1f} {_BYTE_UNITS[unit]}"


# --------------------------------------------------------------------------
# small pieces

_SIMULATED_TAG = '<span class="tag">simulated</span>'


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _sim(check: CheckResult) -> str:
    return _SIMULATED_TAG if check.simulated else ""


def _nodes(checks: Iterable[CheckResult]) -> list[str]:
    """Node columns in the order the results name them; cluster-wide results ("") last."""
    nodes = list(dict.fromkeys(check.node for check in checks))
    return [node for node in nodes if node] + [node for node in nodes if not node]


def _status_class(status: str) -> str:
    return {PASS: "pass", NOT_APPLICABLE: "na"}.get(status, "fail")


def _status_text(status: str) -> str:
    return {PASS: "pass", NOT_APPLICABLE: "n/a"}.get(status, "FAIL")


def _dcgm_cell(outcome: str | None) -> str:
    if outcome is None:
        return f'<td class="empty">{NONE}</td>'
    text = "FAIL" if outcome == "fail" else outcome
    return f'<td class="{outcome}">{text}</td>'


def _num(value: float | None, digits: int = 1) -> str:
    return NONE if value is None else f"{value:,.{digits}f}"


def _percent(value: float | None, peak: float | None) -> str:
    if value is None or not peak:
        return NONE
    return f"{value / peak * 100:.0f}%"
