"""The acceptance report page (deepops_py/html_report.py), rendered from synthetic reports.

The page is parsed back with the standard library's HTMLParser, so the tests
look at elements and attributes, not at substrings of the markup.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from deepops_py import html_report, reports
from deepops_py.run_results import RunResult

NCCL_CURVE_01 = [[2**k, round(min(370.0, 2**k / 2**22 * 50), 2)] for k in range(3, 31)]
NCCL_CURVE_02 = [[2**k, round(min(120.0, 2**k / 2**22 * 20), 2)] for k in range(3, 31)]

DATA = {
    "validate_nodes": [
        {"check": "nodes", "node": "gpu01", "status": "pass", "detail": "idle, GRES gpu:h100:8"},
        {"check": "nodes", "node": "gpu02", "status": "pass", "detail": "idle, GRES gpu:a100:4"},
    ],
    "validate_hostname": [{"check": "hostname", "node": "gpu01,gpu02", "status": "pass", "detail": "2 nodes"}],
    "validate_nccl": [
        {"check": "nccl", "node": "gpu01", "status": "pass", "detail": "busbw 370.0 GB/s >= 300", "simulated": True,
         "measurements": {"busbw_gbps": 370.0, "threshold_gbps": 300, "curve": NCCL_CURVE_01, "gpus": 8,
                          "model": "H100 80GB HBM3", "interconnect": "NVLink"}},
        {"check": "nccl", "node": "gpu02", "status": "fail", "detail": "busbw 120.0 GB/s < 300", "simulated": True,
         "measurements": {"busbw_gbps": 120.0, "threshold_gbps": 300, "curve": NCCL_CURVE_02, "gpus": 4,
                          "model": "A100-SXM4-40GB", "interconnect": "PCIe"}},
    ],
    "validate_dcgm": [
        {"check": "dcgm", "node": "gpu01", "status": "fail", "detail": "memory failed on GPU 3", "simulated": True,
         "measurements": {"level": 3, "tests": {
             "software": {"0": "pass", "1": "pass", "2": "pass", "3": "pass"},
             "memory": {"0": "pass", "1": "pass", "2": "warn", "3": "fail"},
             "pcie": {"0": "skip"},
         }}},
    ],
    "validate_burnin": [
        {"check": "burnin", "node": "gpu01", "status": "pass", "detail": "8 GPUs within 10% of peak", "simulated": True,
         "measurements": {"gpus": [
             {"index": 0, "tflops": 890.5, "peak_tflops": 989.4, "mem_bw_gbps": 3010.0, "peak_mem_bw_gbps": 3350.0,
              "throttle": []},
             {"index": 1, "tflops": None, "peak_tflops": 989.4, "mem_bw_gbps": 2500.0, "peak_mem_bw_gbps": 3350.0,
              "throttle": ["sw_thermal_slowdown"]},
         ]}},
    ],
    "validate_versions": {"slurm": "22.05.8", "nodes": {
        "gpu01": {"driver": "535.104.05", "cuda": "12.2", "nccl": "2.18.3"},
        "gpu02": {"driver": "535.104.05", "cuda": "12.2", "nccl": None},
    }},
}


class Page(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    @property
    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def report_of(data: dict, status: str = "ok") -> reports.ValidationReport:
    result = RunResult(run_id="20261130-101500-validate-ab12", command="validate", playbook="validate.yml",
                       inventory="inv.yml", start="s", artifacts="/tmp/runs/x", status=status, data=data)
    return reports.report_from_run(result)


def render(data: dict = DATA, **kwargs) -> str:
    return html_report.render_html(report_of(data), cluster_name=kwargs.get("cluster_name", "dgx-pod"),
                                   generated_at="2026-11-30T10:20:00+00:00")


def section_text(page: str, anchor: str) -> str:
    match = re.search(rf'<section id="{anchor}">(.*?)</section>', page, re.S)
    assert match, f"no section {anchor}"
    return Page(match.group(1)).all_text


def test_header_names_the_cluster_run_date_and_verdict():
    page = Page(render())
    text = page.all_text
    for words in ("dgx-pod", "20261130-101500-validate-ab12", "2026-11-30T10:20:00+00:00", "5/7 passed, 2 failed"):
        assert words in text
    (verdict,) = page.find("span", id="verdict")
    assert "fail" in verdict["class"].split()
    ok = Page(render({"validate_nodes": DATA["validate_nodes"]}))
    assert "pass" in ok.find("span", id="verdict")[0]["class"].split()


def test_one_nccl_plot_per_node_with_the_threshold_dashed():
    text = render()
    plots = re.findall(r'<svg [^>]*data-plot="nccl".*?</svg>', text, re.S)
    assert len(plots) == 2
    assert [a["data-node"] for a in Page(text).find("svg", data_plot="nccl")] == ["gpu01", "gpu02"]
    for plot, curve in zip(plots, (NCCL_CURVE_01, NCCL_CURVE_02)):
        svg = Page(plot)
        (threshold,) = svg.find("line", **{"class": "threshold"})
        assert threshold["y1"] == threshold["y2"]  # horizontal
        assert "threshold 300.0 GB/s" in svg.all_text
        assert len(svg.find("circle")) == len(curve)
        (polyline,) = svg.find("polyline")
        assert len(polyline["points"].split()) == len(curve)
        # the x axis is log2 of bytes, in human units
        for label in ("16 B", "1 KiB", "1 MiB", "1 GiB"):
            assert label in svg.all_text
    assert 'class="threshold"' in text and "stroke-dasharray: 6 4" in text


def test_threshold_sits_at_its_value_on_the_y_axis():
    svg = Page(re.search(r'<svg [^>]*data-node="gpu02".*?</svg>', render(), re.S).group(0))
    (threshold,) = svg.find("line", **{"class": "threshold"})
    points = [tuple(map(float, p.split(","))) for p in svg.find("polyline")[0]["points"].split()]
    top_y = min(y for _, y in points)  # 120 GB/s, the curve's plateau; SVG y grows downwards
    axis_y = float(svg.find("line", **{"class": "axis"})[0]["y1"])  # 0 GB/s
    assert abs((axis_y - float(threshold["y1"])) / (axis_y - top_y) - 300 / 120) < 0.02


def test_verdict_matrix_has_a_cell_per_check_and_node_with_the_detail_on_hover():
    page = Page(render())
    cells = {a.get("title"): a["class"] for a in page.find("td") if a.get("title")}
    assert cells["busbw 120.0 GB/s < 300"] == "fail"
    assert cells["idle, GRES gpu:h100:8"] == "pass"
    assert cells["2 nodes"] == "pass"
    matrix = section_text(render(), "verdicts")
    assert "FAIL" in matrix and "simulated" in matrix and "memory failed on GPU 3" in matrix


def test_versions_table_says_unknown_for_what_was_not_recorded():
    versions = section_text(render(), "versions")
    assert "22.05.8" in versions and "535.104.05" in versions and "2.18.3" in versions
    assert "unknown" in versions  # gpu02's NCCL
    data = {key: value for key, value in DATA.items() if key != "validate_versions"}
    bare = section_text(render(data), "versions")
    assert "Slurm: unknown" in bare and "gpu01 unknown unknown unknown" in bare


def test_dcgm_matrix_is_test_by_gpu():
    page = Page(render())
    (table,) = page.find("table", **{"class": "dcgm"})
    assert table["data-node"] == "gpu01"
    dcgm = section_text(render(), "dcgm")
    assert "level 3" in dcgm and "GPU 0 GPU 1 GPU 2 GPU 3" in dcgm
    assert "memory pass pass warn FAIL" in dcgm
    assert "pcie skip \u2014 \u2014 \u2014" in dcgm


def test_burnin_table_shows_figure_peak_percent_and_throttling():
    burnin = section_text(render(), "burnin")
    assert "0 890.5 989.4 90% 3,010.0 3,350.0 90% none" in burnin
    assert "1 \u2014 989.4 \u2014 2,500.0 3,350.0 75% sw_thermal_slowdown" in burnin


def test_simulated_results_show_a_banner_and_are_marked_where_they_appear():
    page = Page(render())
    assert page.find("div", id="simulated")
    assert "SIMULATED" in page.all_text and "4 of 7 results" in page.all_text
    assert all("SIMULATED" in Page(plot).all_text
               for plot in re.findall(r'<svg [^>]*data-plot="nccl".*?</svg>', render(), re.S))
    real = Page(render({"validate_nodes": DATA["validate_nodes"]}))
    assert not real.find("div", id="simulated") and "simulated" not in real.all_text.lower()


def test_sections_without_data_say_so():
    page = render({"validate_nodes": DATA["validate_nodes"]})
    assert "No NCCL bandwidth was measured." in section_text(page, "nccl")
    assert "No DCGM diagnostics were run." in section_text(page, "dcgm")
    assert "No burn-in was run." in section_text(page, "burnin")
    assert "No check failed." in section_text(page, "verdicts")
    empty = html_report.render_html(reports.ValidationReport("r", "ok"), cluster_name="c", generated_at="d")
    assert "No check results were recorded." in section_text(empty, "verdicts")
    assert "No node versions were recorded." in section_text(empty, "versions")


def test_a_check_without_a_curve_is_listed_not_plotted():
    data = {**DATA, "validate_nccl": [{"check": "nccl", "node": "gpu01", "status": "fail", "detail": "all_reduce_perf rc=1"}]}
    page = render(data)
    assert 'data-plot="nccl"' not in page
    assert "gpu01 : no bandwidth curve recorded (FAIL: all_reduce_perf rc=1)" in section_text(page, "nccl")


def test_everything_from_the_cluster_is_escaped():
    evil = '<script>alert("x")</script>'
    data = {
        "validate_nodes": [{"check": "nodes", "node": 'gpu"01<b>', "status": "fail", "detail": evil}],
        "validate_nccl": [{"check": "nccl", "node": 'gpu"01<b>', "status": "pass", "detail": "'quoted' & <more>",
                           "measurements": {**DATA["validate_nccl"][0]["measurements"], "model": evil}}],
        "validate_versions": {"slurm": evil, "nodes": {'gpu"01<b>': {"driver": evil}}},
    }
    text = html_report.render_html(report_of(data), cluster_name=evil, generated_at=evil)
    assert "<script" not in text and "<b>" not in text
    page = Page(text)
    assert [a["data-node"] for a in page.find("svg", data_plot="nccl")] == ['gpu"01<b>']
    assert any(a.get("title") == evil for a in page.find("td"))
    assert evil in page.all_text


def test_the_page_is_self_contained():
    text = render()
    assert not re.search(r"""\b(?:src|href|xlink:href|action)\s*=\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert "http://" not in text and "https://" not in text
    for tag in ("script", "link", "img", "iframe", "object", "embed"):
        assert not Page(text).find(tag), tag
    assert "@import" not in text and "url(" not in text and "@font-face" not in text
    assert all(a["href"].startswith("#") for a in Page(text).find("a"))
    assert "default-src 'none'" in text  # the browser is told not to fetch anything either


def test_rendering_is_deterministic():
    assert render() == render()
    assert render().startswith("<!DOCTYPE html>")


def test_malformed_measurements_are_dropped_not_plotted():
    data = {"validate_nccl": [
        {"check": "nccl", "node": "gpu01", "status": "pass", "measurements": {"busbw_gbps": "fast", "curve": [[1, 2]]}},
        {"check": "nccl", "node": "gpu02", "status": "pass", "measurements": {"busbw_gbps": 1, "curve": [[8, float("nan")]]}},
        {"check": "nccl", "node": "gpu03", "status": "pass", "measurements": ["not", "a", "dict"]},
    ]}
    page = render(data)
    assert 'data-plot="nccl"' not in page
    assert section_text(page, "nccl").count("no bandwidth curve recorded") == 3


def test_a_single_point_curve_without_threshold_still_plots():
    measurements = {"busbw_gbps": 0.0, "threshold_gbps": None, "curve": [[1024, 0.0]], "gpus": 1, "model": "", "interconnect": ""}
    page = render({"validate_nccl": [{"check": "nccl", "node": "gpu01", "status": "pass", "measurements": measurements}]})
    svg = Page(re.search(r"<svg .*?</svg>", page, re.S).group(0))
    assert not svg.find("line", **{"class": "threshold"}) and len(svg.find("circle")) == 1
    assert "no threshold" in section_text(page, "nccl")
