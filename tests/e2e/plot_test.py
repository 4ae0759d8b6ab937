#!/usr/bin/python3
"""tools/txbatch-plot against the documents txbatch writes: a simulated sweep over batch 1..64 x
producers 1,8 x two sizes x two syncs, and a compare. Each figure's series, labels and points are
checked against results.json (figures.json says what was drawn; the SVG must hold every series
and its whole label); bad input gets one sentence and exit 2, nothing written.

  plot_test.py TXBATCH TXBATCH_PLOT
"""

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

TXBATCH, PLOT = sys.argv[1], sys.argv[2]
SVG = "{http://www.w3.org/2000/svg}"


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)


def shape(c):
    return f"{c['sync']} {c['runner']}"


class Sweep(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        r = run([TXBATCH, "sweep", "--engine", "sim", "--driver", "emu:ixgbe", "--sync",
                 "rootlock,nolock", "--proto", "udp", "--procs", "1,8", "--size", "64,1500",
                 "--batch", "1,2,4,8,16,32,64", "--rounds", "2", "--duration", "0.02",
                 "--warmup", "0.005", "--out", cls.dir])
        assert r.returncode == 0, r.stderr
        r = run([PLOT, cls.dir])
        assert r.returncode == 0, r.stderr
        with open(os.path.join(cls.dir, "results.json")) as f:
            cls.doc = json.load(f)
        with open(os.path.join(cls.dir, "figures.json")) as f:
            cls.figs = {fig["file"]: fig for fig in json.load(f)["figures"]}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def cells(self):
        """(procs, size, label, batch) -> the cell's records, computed here from the records."""
        out = {}
        for r in self.doc["records"]:
            c = r["config"]
            label = f"{c['driver_given']} {shape(c)}"
            out.setdefault((c["procs"], c["size"], label, c["batch"]), []).append(r)
        return out

    def svg(self, name):
        return ET.parse(os.path.join(self.dir, name + ".svg")).getroot()

    def test_every_figure_in_svg_and_png(self):
        for name in ("latency", "throughput", "cost", "batching"):
            for ext in ("svg", "png"):
                path = os.path.join(self.dir, f"{name}.{ext}")
                self.assertGreater(os.path.getsize(path), 1000, path)
            with open(os.path.join(self.dir, name + ".png"), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertEqual([n for n in os.listdir(self.dir) if n.startswith(".txbatch-plot")], [])

    def test_throughput_is_the_mean_of_rounds_per_cell_with_its_interval(self):
        cells = self.cells()
        panels = self.figs["throughput"]["panels"]
        self.assertEqual(len(panels), 4)  # procs 1,8 x sizes 64,1500
        for panel in panels:
            labels = [s["label"] for s in panel["series"]]
            self.assertEqual(sorted(labels),
                             ["emu:ixgbe nolock inline", "emu:ixgbe rootlock inline"])
            for s in panel["series"]:
                self.assertEqual(s["x"], [1, 2, 4, 8, 16, 32, 64])
                p, size = panel["procs"], panel["size"]
                for b, y, h in zip(s["x"], s["y"], s["ci95"]):
                    vals = [r["results"]["mpps"] for r in cells[(p, size, s["label"], b)]]
                    self.assertEqual(len(vals), 2)
                    self.assertAlmostEqual(y, sum(vals) / 2, places=12)
                    # two rounds: t(1) = 12.706 times the standard error
                    se = abs(vals[0] - vals[1]) / 2
                    self.assertAlmostEqual(h, 12.706 * se, places=9)
            self.assertTrue(panel.get("ceilings"), "the wire's ceiling is drawn")

    def test_cost_and_batching_panels_follow_the_records(self):
        cells = self.cells()
        for fig, metrics in (("cost", ["cycles_per_pkt", "cpu_ns_per_pkt"]),
                             ("batching", ["avg_batch", "doorbells_per_pkt"])):
            panels = self.figs[fig]["panels"]
            self.assertEqual(len(panels), 8)  # 4 facets x 2 metrics
            for i, panel in enumerate(panels):
                metric = metrics[i % 2]
                p, size = panel["procs"], panel["size"]
                for s in panel["series"]:
                    for b, y in zip(s["x"], s["y"]):
                        vals = [r["results"][metric] for r in cells[(p, size, s["label"], b)]]
                        self.assertAlmostEqual(y, sum(vals) / len(vals), places=9, msg=metric)

    def test_ccdfs_come_from_the_exported_histograms(self):
        cells = self.cells()
        ccdfs = [p for p in self.figs["latency"]["panels"] if p["kind"] == "ccdf"]
        self.assertEqual(len(ccdfs), 4)
        for panel in ccdfs:
            names = [s["label"] for s in panel["series"]]
            for b in (1, 32):  # batch 1 against batch 32, on both syncs
                self.assertIn(f"batch {b} emu:ixgbe rootlock inline", names)
                self.assertIn(f"batch {b} emu:ixgbe nolock inline", names)
            p, size = panel["procs"], panel["size"]
            for s in panel["series"]:
                batch, label = s["label"].split(" ", 2)[1:]
                recs = cells[(p, size, label, int(batch))]
                self.assertEqual(s["frames"], sum(r["results"]["latency_ns"]["count"]
                                                  for r in recs))
                self.assertEqual(s["later"][0], 1.0)
                self.assertTrue(all(a >= b for a, b in zip(s["later"], s["later"][1:])))
                self.assertTrue(all(a <= b for a, b in zip(s["x_us"], s["x_us"][1:])))
                # The curve runs to the slowest frame: the last bin's upper edge is past the
                # rounds' max, by less than a bin, and its frames are still drawn.
                top = max(r["results"]["latency_ns"]["max"] for r in recs) / 1e3
                self.assertGreaterEqual(s["x_us"][-1], top)
                self.assertLessEqual(s["x_us"][-1], top * (1 + 1 / 128) + 1e-9)
                self.assertGreater(s["later"][-1], 0)
        stages = [p for p in self.figs["latency"]["panels"] if p["kind"] == "stages"]
        self.assertEqual(len(stages), 4)
        self.assertTrue(any(p["bars"] for p in stages))

    def test_every_series_is_in_its_svg_with_its_whole_label_and_its_own_style(self):
        for name, fig in self.figs.items():
            root = self.svg(name)
            ids = {e.get("id") for e in root.iter() if e.get("id")}
            texts = "\n".join(t.text or "" for t in root.iter(SVG + "text"))
            styles = {}
            for panel in fig["panels"]:
                for s in panel.get("series", []):
                    self.assertIn("series:" + s["label"], ids, f"{name}: {s['label']}")
                    self.assertIn(s["label"], texts, f"{name}: the legend says it whole")
                    styles.setdefault(s["label"], (s["colour"], s["marker"]))
                    self.assertEqual(styles[s["label"]], (s["colour"], s["marker"]),
                                     "one style a series across panels")
            pairs = list(styles.values())
            self.assertEqual(len(set(pairs)), len(pairs), f"{name}: a style per series")
            if len(pairs) <= 18:
                self.assertEqual(len({c for c, _ in pairs}), len(pairs), f"{name}: colours")


class SyncAuto(unittest.TestCase):
    def test_a_sync_auto_chose_is_a_series_beside_the_same_sync_asked_for(self):
        with tempfile.TemporaryDirectory() as d:
            r = run([TXBATCH, "sweep", "--engine", "sim", "--driver", "emu:ixgbe", "--sync",
                     "auto,rootlock", "--proto", "udp", "--procs", "2", "--size", "64",
                     "--batch", "1,8", "--rounds", "2", "--duration", "0.02", "--warmup",
                     "0.005", "--out", d])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("drew ", r.stdout)
            with open(os.path.join(d, "figures.json")) as f:
                fig = json.load(f)["figures"][1]
            series = {s["label"]: s for s in fig["panels"][0]["series"]}
            self.assertEqual(sorted(series), ["emu:ixgbe rootlock inline",
                                              "emu:ixgbe rootlock inline (--sync auto)"])
            with open(os.path.join(d, "results.json")) as f:
                doc = json.load(f)
            for label, s in series.items():
                auto = label.endswith("(--sync auto)")
                for b, y in zip(s["x"], s["y"]):
                    vals = [r["results"]["mpps"] for r in doc["records"]
                            if r["config"]["batch"] == b and r["config"]["sync_auto"] == auto]
                    self.assertEqual(len(vals), 2)  # its own two rounds, not four
                    self.assertAlmostEqual(y, sum(vals) / 2, places=12)


class Compare(unittest.TestCase):
    def test_each_round_and_the_ratio_with_its_interval(self):
        with tempfile.TemporaryDirectory() as d:
            doc_path = os.path.join(d, "cmp.json")
            r = run([TXBATCH, "compare", "--engine", "sim", "--driver", "emu:ixgbe", "--procs",
                     "8", "--proto", "udp", "--size", "64", "--batch", "1,32", "--rounds", "3",
                     "--duration", "0.02", "--warmup", "0.005", "--json", doc_path])
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run([PLOT, doc_path, "--out", d, "--format", "svg"])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(doc_path) as f:
                doc = json.load(f)
            with open(os.path.join(d, "figures.json")) as f:
                fig = json.load(f)["figures"][0]
            self.assertEqual(fig["file"], "compare")
            mpps = fig["panels"][0]
            self.assertEqual(mpps["title"], "Mpps")
            for s in mpps["series"]:
                side = s["label"][0]
                want = [r["results"]["mpps"] for r in sorted(
                    (r for r in doc["records"] if r["side"] == side), key=lambda r: r["round"])]
                self.assertEqual(s["y"], want)
                self.assertEqual(s["x"], [1, 2, 3])
            ratios = {m["metric"]: m for m in fig["panels"][-1]["ratios"]}
            for m in doc["comparison"]["metrics"]:
                if m["metric"] in ratios:
                    self.assertEqual(ratios[m["metric"]]["ratio"], m["ratio"])
                    self.assertEqual(ratios[m["metric"]]["ci95"], m["ci95"])
            self.assertTrue(os.path.exists(os.path.join(d, "compare.svg")))
            self.assertFalse(os.path.exists(os.path.join(d, "compare.png")))


class Bufferbloat(unittest.TestCase):
    """--probe's records draw `bufferbloat`: per driver the probe's p50 and p99 and the cell's
    throughput, a bar per (qdisc, BQL, batch), each the mean of its rounds' records; a document
    without a probe draws none."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "bb.json")
        r = run([TXBATCH, "run", "--engine", "sim", "--driver", "emu:e1000", "--driver",
                 "emu:ixgbe", "--proto", "tcp", "--offload", "none", "--size", "65536",
                 "--procs", "8", "--policy", "count:1,count:32,linux-2025", "--qdisc",
                 "pfifo_fast,fq_codel", "--probe", "1000pps", "--rounds", "2", "--duration",
                 "0.03", "--warmup", "0.02", "--json", cls.path])
        assert r.returncode == 0, r.stderr
        r = run([PLOT, cls.path, "--out", cls.tmp.name, "--format", "svg"])
        assert r.returncode == 0, r.stderr
        with open(cls.path) as f:
            cls.doc = json.load(f)
        with open(os.path.join(cls.tmp.name, "figures.json")) as f:
            cls.fig = {fig["file"]: fig for fig in json.load(f)["figures"]}["bufferbloat"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def records(self, driver, policy, qdisc):
        return [r for r in self.doc["records"] if r["config"]["driver_given"] == driver
                and r["config"]["policy"] == policy and r["config"]["qdisc"] == qdisc]

    def test_a_bar_per_qdisc_bql_and_batch_from_the_records(self):
        panels = self.fig["panels"]
        self.assertEqual([(p["title"], p["kind"]) for p in panels],
                         [("emu:e1000", "probe latency"), ("emu:e1000", "throughput"),
                          ("emu:ixgbe", "probe latency"), ("emu:ixgbe", "throughput")])
        for lat, thr in zip(panels[::2], panels[1::2]):
            self.assertEqual(len(lat["bars"]), 6)
            self.assertEqual([b["label"] for b in lat["bars"]],
                             [b["label"] for b in thr["bars"]])
            self.assertEqual(len({b["label"] for b in lat["bars"]}), 6)
            for b, t in zip(lat["bars"], thr["bars"]):
                recs = self.records(lat["title"], b["policy"], b["qdisc"])
                self.assertEqual(len(recs), 2, b["label"])
                self.assertEqual(b["rounds"], 2)
                # BQL ran where the record says it did, and the label says so.
                bql = recs[0]["results"]["bql"] is not None
                self.assertEqual(b["bql"], bql)
                self.assertIn("BQL on" if bql else "BQL off", b["label"])
                self.assertEqual(bql, b["policy"] == "linux-2025")
                for q in ("p50", "p99"):
                    vals = [r["results"]["probe"]["latency_ns"][q] / 1e3 for r in recs]
                    self.assertAlmostEqual(b[q + "_us"], sum(vals) / 2, places=9)
                self.assertEqual(b["lost"], sum(r["results"]["probe"]["lost"] for r in recs))
                mbs = [r["results"]["mb_per_s"] for r in recs]
                self.assertAlmostEqual(t["mb_per_s"], sum(mbs) / 2, places=9)
                self.assertEqual(t["colour"], b["colour"])
            ceilings = [r["results"]["link_ceiling"]["mb_per_s"] for r in self.doc["records"]
                        if r["config"]["driver_given"] == lat["title"]]
            self.assertAlmostEqual(thr["ceiling_mb_per_s"], sum(ceilings) / len(ceilings),
                                   places=9)

    def test_every_bar_is_in_the_svg_with_its_label(self):
        root = ET.parse(os.path.join(self.tmp.name, "bufferbloat.svg")).getroot()
        ids = {e.get("id") for e in root.iter() if e.get("id")}
        texts = "\n".join(t.text or "" for t in root.iter(SVG + "text"))
        for panel in self.fig["panels"]:
            for b in panel["bars"]:
                kinds = ("p50", "p99") if panel["kind"] == "probe latency" else ("throughput",)
                for k in kinds:
                    self.assertIn(f"{k}:{b['label']}", ids)
                self.assertIn(b["label"], texts)

    def test_report_out_names_it_drawn_and_removes_it_where_none_are(self):
        # tools/figures.cc: the `drew` line names bufferbloat.*; where nothing is drawn, the
        # bufferbloat.* txbatch-plot drew go and a user's file of its name stays, named.
        with tempfile.TemporaryDirectory() as d:
            plot = dict(os.environ, TXBATCH_PLOT=os.path.abspath(PLOT))
            r = run([TXBATCH, "report", self.path, "--out", d], env=plot)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("bufferbloat.svg,bufferbloat.png,figures.json}", r.stdout)
            self.assertTrue(os.path.exists(os.path.join(d, "bufferbloat.png")))
            with open(os.path.join(d, "bufferbloat.pdf"), "w") as f:
                f.write("mine")
            r = run([TXBATCH, "report", self.path, "--out", d],
                    env=dict(os.environ, TXBATCH_PLOT=""))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("not drawn by txbatch or changed since: bufferbloat.pdf)", r.stderr)
            for ext in ("svg", "png"):
                self.assertFalse(os.path.exists(os.path.join(d, "bufferbloat." + ext)), ext)
            with open(os.path.join(d, "bufferbloat.pdf")) as f:
                self.assertEqual(f.read(), "mine")
            # Records without a probe: a user's bufferbloat.svg is not named as drawn.
            with open(os.path.join(d, "bufferbloat.svg"), "w") as f:
                f.write("mine")
            doc = os.path.join(d, "p.json")
            sim_run(doc)
            r = run([TXBATCH, "report", doc, "--out", d], env=plot)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("drew ", r.stdout)
            self.assertNotIn("bufferbloat", r.stdout)
            with open(os.path.join(d, "bufferbloat.svg")) as f:
                self.assertEqual(f.read(), "mine")

    def test_a_document_without_a_probe_draws_no_bufferbloat(self):
        with tempfile.TemporaryDirectory() as d:
            doc = os.path.join(d, "p.json")
            sim_run(doc)
            r = run([PLOT, doc, "--out", d, "--format", "svg"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("bufferbloat", r.stdout)
            self.assertFalse(os.path.exists(os.path.join(d, "bufferbloat.svg")))


class BadInput(unittest.TestCase):
    def refused(self, args, says):
        with tempfile.TemporaryDirectory() as d:
            r = run([PLOT] + args(d))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(r.stdout, "")
            # matplotlib's own first-import notice on a machine where it never ran is not ours.
            lines = [l for l in r.stderr.strip().split("\n")
                     if not l.startswith("Matplotlib is building the font cache")]
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(says, lines[0])
            self.assertEqual([n for n in os.listdir(d) if n != "in.json"], [])

    def write(self, d, text):
        with open(os.path.join(d, "in.json"), "w") as f:
            f.write(text)
        return os.path.join(d, "in.json")

    def test_each_gets_one_sentence_and_exit_2_and_nothing_written(self):
        self.refused(lambda d: [os.path.join(d, "missing.json"), "--out", d], "cannot read")
        self.refused(lambda d: [self.write(d, "{not json"), "--out", d], "is not JSON")
        self.refused(lambda d: [self.write(d, '{"x": 1}'), "--out", d], "no txbatch records")
        self.refused(lambda d: [self.write(d, '{"schema_version": 1, "records": []}'), "--out",
                                d], "no txbatch records")
        self.refused(lambda d: [self.write(
            d, '{"schema_version": 1, "records": [{"config": {}}]}'), "--out", d],
            "not a complete txbatch result document (key 'driver' not found)")
        self.refused(lambda d: [self.write(d, '{"records": []}'), "--format", "gif", "--out",
                                d], "--format")
        self.refused(lambda d: [self.write(d, '{"records": []}'), "--dpi", "5", "--out", d],
                     "--dpi")
        self.refused(lambda d: [self.write(d, '{"records": []}'), "--out",
                                self.write(d, "{}")], "it exists and is not a folder")
        self.refused(lambda d: [self.write(d, '{"records": []}'), "--out=-"],
                     "--out names a folder for several files")


def sim_run(path):
    r = run([TXBATCH, "run", "--engine", "sim", "--driver", "emu:null", "--procs", "1",
             "--batch", "8", "--duration", "0.02", "--warmup", "0.01", "--json", path])
    assert r.returncode == 0, r.stderr
    with open(path) as f:
        return json.load(f)


class OneReadersRules(BadInput):
    """Issue 44, item 19: what `txbatch report` refuses, txbatch-plot refuses, with one sentence
    and exit 2, nothing drawn; what report reads, it draws. Each case runs both."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.good = sim_run(os.path.join(cls.tmp.name, "good.json"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def both(self, text, says, path=None):
        """`text` as in.json (or `path`): report and txbatch-plot both refuse it."""
        def args(d):
            return [path or self.write(d, text), "--out", d]
        with tempfile.TemporaryDirectory() as d:
            r = run([TXBATCH, "report", path or self.write(d, text)])
            self.assertEqual(r.returncode, 2, f"report: {r.stderr}")
        self.refused(args, says)

    def tampered(self, edit):
        doc = json.loads(json.dumps(self.good))
        edit(doc)
        return doc

    def test_deep_nesting_is_a_sentence_not_a_recursion_error(self):
        # a traceback and exit 1 before
        self.both("[" * 100000 + "]" * 100000, "deeper than the 64 levels")
        deep = self.tampered(lambda doc: doc.update(extra=json.loads("[" * 64 + "]" * 64)))
        self.both(json.dumps(deep), "deeper than the 64 levels")

    def test_64_levels_draw_as_report_reads_them(self):
        doc = self.tampered(lambda doc: doc.update(extra=json.loads("[" * 63 + "]" * 63)))
        with tempfile.TemporaryDirectory() as d:
            path = self.write(d, json.dumps(doc))
            self.assertEqual(run([TXBATCH, "report", path]).returncode, 0)
            r = run([PLOT, path, "--out", d, "--format", "svg"])
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_nan_infinity_and_numbers_past_a_double(self):
        # each was drawn, exit 0, before
        text = json.dumps(self.good)
        self.both(text.replace('"mpps": ', '"mpps": NaN, "x": ', 1), "NaN is not a JSON value")
        self.both(text.replace('"mpps": ', '"mpps": -Infinity, "x": ', 1),
                  "-Infinity is not a JSON value")
        self.both(text.replace('"mpps": ', '"mpps": 1e400, "x": ', 1),
                  "number overflow parsing '1e400'")
        self.both(text.replace('"mpps": ', '"mpps": ' + "9" * 400 + ', "x": ', 1),
                  "number overflow")

    def test_bins_that_do_not_go_up_and_fields_of_the_wrong_kind(self):
        def upside_down(doc):
            doc["records"][0]["results"]["latency_hist_ns"]["bins"][0][:2] = [5, 2]
        self.both(json.dumps(self.tampered(upside_down)), "lo < hi")  # drawn before
        def fractional_size(doc):
            doc["records"][0]["config"]["size"] = 64.5
        self.both(json.dumps(self.tampered(fractional_size)), "an integer in 0..4294967295")
        def schema_string(doc):
            doc["schema_version"] = "1"
        self.both(json.dumps(self.tampered(schema_string)), 'schema_version "1"')
        def no_env(doc):
            del doc["records"][0]["env"]
        self.both(json.dumps(self.tampered(no_env)), "key 'env' not found")
        # nlohmann's get<double>() takes no boolean (txbatch-plot drew these, exit 0, before).
        for where in ("config", "results"):
            def boolean_double(doc, where=where):
                rec = doc["records"][0]
                rec[where]["duration_s" if where == "config" else "mb_per_s"] = True
            self.both(json.dumps(self.tampered(boolean_double)),
                      "type must be number, but is boolean")

    def test_devices_fifos_and_a_sink_record(self):
        self.both(None, "is a character device", path="/dev/zero")  # read without end before
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "fifo")
            os.mkfifo(fifo)
            self.both(None, "is a FIFO", path=fifo)
        sink = {"schema_version": 1, "kind": "sink", "port": "net_null0", "results": {}}
        self.both(json.dumps(sink), "is a txbatch sink record; report reads "
                                    "run/compare/sweep/tune/calibrate result documents")


class NewRecordFields(BadInput):
    """results.mq, results.probe, results.fq_codel, results.fairness, config.probe,
    config.qdisc_params, config.flows and accounting.dropped_queued: read as report reads them
    (results/record_reader.cc), each mistyped or incomplete one refused by both with one
    sentence; records from before them (the fields absent) draw."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        path = os.path.join(cls.tmp.name, "good.json")
        r = run([TXBATCH, "run", "--engine", "sim", "--driver", "emu:e1000", "--qdisc",
                 "fq_codel", "--queues", "2", "--procs", "2", "--flows", "2", "--probe",
                 "1000pps", "--batch", "8", "--duration", "0.02", "--warmup", "0.01", "--json",
                 path])
        assert r.returncode == 0, r.stderr
        with open(path) as f:
            cls.good = json.load(f)
        res = cls.good["records"][0]["results"]
        assert isinstance(res["mq"], list) and isinstance(res["probe"], dict)
        assert isinstance(res["fq_codel"], dict) and "dropped_queued" in res["accounting"]
        assert cls.good["records"][0]["config"]["flows"] == 2
        assert isinstance(res["fairness"], dict) and res["fairness"]["flows"] == 4

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    both = OneReadersRules.both
    tampered = OneReadersRules.tampered

    def edit(self, f):
        def change(doc):
            f(doc["records"][0]["config"], doc["records"][0]["results"])
        return json.dumps(self.tampered(change))

    def test_mistyped_or_incomplete_fields_are_one_sentence(self):
        cases = [
            (lambda c, r: r.update(mq=5), "mq: an array of child qdiscs was expected"),
            (lambda c, r: r["mq"][1].update(queue_wakes=-1), "an integer in 0..1844"),
            (lambda c, r: r["mq"][0].update(queue=2**32), "an integer in 0..4294967295"),
            (lambda c, r: r["mq"][0].pop("fq_codel"), "key 'fq_codel' not found"),
            (lambda c, r: r["mq"][0]["fq_codel"].pop("new_flow_count"),
             "key 'new_flow_count' not found"),
            (lambda c, r: r["probe"].pop("lost"), "key 'lost' not found"),
            (lambda c, r: r["probe"].update(flow=2**32), "an integer in 0..4294967295"),
            (lambda c, r: r["probe"].update(generated=None), "not null"),
            (lambda c, r: r["probe"].update(latency_ns="1ms"), "cannot use at() with string"),
            (lambda c, r: r["probe"]["latency_ns"].update(p99="2"),
             "type must be number, but is string"),
            (lambda c, r: r.update(probe=[]), "cannot use at() with array"),
            (lambda c, r: r["fq_codel"].update(ecn_mark=1.5), "not 1.5"),
            (lambda c, r: r["fq_codel"].pop("maxpacket"), "key 'maxpacket' not found"),
            (lambda c, r: r["accounting"].update(dropped_queued="3"), 'not "3"'),
            (lambda c, r: c.update(qdisc_params=7),
             "fq_codel's parameters as tc words were expected, not 7"),
            (lambda c, r: c.pop("qdisc_params"),
             "fq_codel's parameters as tc words were expected, not null"),
            (lambda c, r: c.update(qdisc_params="limit 100p target 1us"),
             "fq_codel's target must be a time from 2us to 4294s"),
            (lambda c, r: c.update(qdisc_params="bogus 3"), "fq_codel has no parameter 'bogus'"),
            (lambda c, r: c.update(qdisc_params="flows 65537"), "fq_codel's flows must be"),
            (lambda c, r: c.update(qdisc_params="memory_limit 3gb"),
             "fq_codel's memory_limit must be"),
            (lambda c, r: c.update(qdisc_params="quantum"), "fq_codel's 'quantum' needs a value"),
            (lambda c, r: c.update(flows=0),
             "flows (each producer's) of 1 or more was expected, not 0"),
            (lambda c, r: c.update(flows="3"), 'an integer in 0..4294967295 was expected, not "3"'),
            (lambda c, r: c.update(flows=-1), "an integer in 0..4294967295 was expected, not -1"),
            (lambda c, r: c.update(flows=2.0), "an integer in 0..4294967295 was expected, not 2.0"),
            (lambda c, r: c.update(flows=2**32), "was expected, not 4294967296"),
            (lambda c, r: c.update(flows=None), "0..4294967295 was expected, not null"),
            (lambda c, r: r["fairness"].pop("jain"), "key 'jain' not found"),
            (lambda c, r: r["fairness"].pop("flows"), "key 'flows' not found"),
            (lambda c, r: r["fairness"].pop("min_received"), "key 'min_received' not found"),
            (lambda c, r: r["fairness"].pop("max_received"), "key 'max_received' not found"),
            (lambda c, r: r["fairness"].update(jain="1"), "type must be number, but is string"),
            (lambda c, r: r["fairness"].update(jain=True), "type must be number, but is boolean"),
            (lambda c, r: r["fairness"].update(flows=2**32), "not 4294967296"),
            (lambda c, r: r["fairness"].update(max_received=-1), "not -1"),
            (lambda c, r: r["fairness"].update(min_received=3.5), "not 3.5"),
            (lambda c, r: r.update(fairness=[]), "cannot use at() with array"),
            (lambda c, r: r.update(fairness=0.9), "cannot use at() with number"),
            # What ResultOf cannot write (each was read and drawn before): Jain's index over n
            # flows lies in 1/n..1, fairness needs two flows, the least at most the most, and
            # a cell has at most 4096 flows in all (kMaxFlows; the good record has 2 x 2).
            (lambda c, r: r["fairness"].update(jain=7),
             "Jain's index over 4 flows in 1/4..1 was expected, not 7"),
            (lambda c, r: r["fairness"].update(jain=-1),
             "Jain's index over 4 flows in 1/4..1 was expected, not -1"),
            (lambda c, r: r["fairness"].update(jain=0.2),
             "Jain's index over 4 flows in 1/4..1 was expected, not 0.2"),
            (lambda c, r: r["fairness"].update(flows=1),
             "fairness over 2 or more flows was expected, not 1"),
            (lambda c, r: r["fairness"].update(min_received=10, max_received=9),
             "fairness' min_received at most its max_received was expected, not 10 > 9"),
            (lambda c, r: c.update(flows=2049),
             "at most 4096 flows in all (procs x flows) were expected, not 2 x 2049"),
            # a record from before config.flows: one a producer, checked as such by both
            (lambda c, r: (c.pop("flows"), c.update(procs=5000)),
             "at most 4096 flows in all (procs x flows) were expected, not 5000 x 1"),
        ]
        for edit, says in cases:
            with self.subTest(says=says):
                self.both(self.edit(edit), says)

    def test_records_with_them_and_records_from_before_them_draw(self):
        def old(c, r):
            for k in ("mq", "probe", "fq_codel"):
                r.pop(k)
            r["accounting"].pop("dropped_queued")
            r.pop("fairness")
            c.pop("flows")
            c.pop("probe")
            c.update(qdisc="pfifo_fast")
            c.pop("qdisc_params")
        for text in (json.dumps(self.good), self.edit(old),
                     self.edit(lambda c, r: c.update(
                         qdisc_params="target 5MS interval 2.9us limit 100p memory_limit 4mb "
                                      "noecn flows 64 quantum 300 drop_batch 8")),
                     # fairness null (one flow, or none came back), and an integer jain
                     self.edit(lambda c, r: r.update(fairness=None)),
                     self.edit(lambda c, r: r["fairness"].update(jain=1)),
                     # the bounds themselves: 1/n, and 4096 flows in all
                     self.edit(lambda c, r: r["fairness"].update(jain=0.25)),
                     self.edit(lambda c, r: c.update(flows=2048))):
            with tempfile.TemporaryDirectory() as d:
                path = self.write(d, text)
                r = run([TXBATCH, "report", path])
                self.assertEqual(r.returncode, 0, r.stderr)
                r = run([PLOT, path, "--out", d, "--format", "svg"])
                self.assertEqual(r.returncode, 0, r.stderr)


class OutFolder(unittest.TestCase):
    """--out as report --out takes it: a missing folder is made (refused before), and a folder
    whose name starts with '-' is a folder where txbatch runs txbatch-plot (it was taken for an
    option: no figures)."""

    def test_a_missing_out_folder_is_made(self):
        with tempfile.TemporaryDirectory() as d:
            doc = os.path.join(d, "p.json")
            sim_run(doc)
            out = os.path.join(d, "a", "b")
            r = run([PLOT, doc, "--out", out, "--format", "svg"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.exists(os.path.join(out, "throughput.svg")))

    def test_report_out_folder_named_like_an_option_gets_its_figures(self):
        with tempfile.TemporaryDirectory() as d:
            doc = os.path.join(d, "p.json")
            sim_run(doc)
            r = run([TXBATCH, "report", doc, "--out=-x"], cwd=d,
                    env=dict(os.environ, TXBATCH_PLOT=os.path.abspath(PLOT)))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("no figures", r.stderr)
            self.assertIn("drew -x/", r.stdout)
            self.assertTrue(os.path.exists(os.path.join(d, "-x", "latency.svg")))



class EarlierFigures(unittest.TestCase):
    """Figures an earlier drawing left that this one does not draw again go, where figures.json
    lists them and they are still as drawn; a figure changed since, and a user's file that only
    has a figure's name, stay (issue 44, item 21)."""

    def test_only_figures_drawn_and_unchanged_are_removed(self):
        with tempfile.TemporaryDirectory() as d:
            doc, out = os.path.join(d, "p.json"), os.path.join(d, "figs")
            sim_run(doc)
            os.mkdir(out)
            with open(os.path.join(out, "compare.pdf"), "w") as f:
                f.write("mine")
            r = run([PLOT, doc, "--out", out, "--format", "svg,pdf"])
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "figures.json")) as f:
                files = json.load(f)["files"]
            self.assertEqual(sorted(files), sorted(f"{n}.{x}" for n in
                                                   ("latency", "throughput", "cost", "batching")
                                                   for x in ("svg", "pdf")))
            with open(os.path.join(out, "cost.pdf"), "ab") as f:
                f.write(b"% mine")
            r = run([PLOT, doc, "--out", out, "--format", "svg"])
            self.assertEqual(r.returncode, 0, r.stderr)
            for name in ("latency", "throughput", "batching"):
                self.assertFalse(os.path.exists(os.path.join(out, name + ".pdf")), name)
            with open(os.path.join(out, "cost.pdf"), "rb") as f:
                self.assertTrue(f.read().endswith(b"% mine"))
            with open(os.path.join(out, "compare.pdf")) as f:
                self.assertEqual(f.read(), "mine")
            with open(os.path.join(out, "figures.json")) as f:
                self.assertEqual(sorted(json.load(f)["files"]),
                                 ["batching.svg", "cost.svg", "latency.svg", "throughput.svg"])

class FigureStems(unittest.TestCase):
    """tools/figures.cc's kFigureStems are FIGURE_FILE's stems: txbatch removes (where nothing
    is drawn) and names the figures txbatch-plot may draw; one missing there (bufferbloat was)
    stayed behind, its data gone."""

    def test_figures_cc_has_every_stem_and_format_txbatch_plot_draws(self):
        with open(PLOT) as f:
            plot = f.read()
        m = re.search(r'FIGURE_FILE = re\.compile\(\s*r"\(([a-z|]+)\)\\\.\(([a-z|]+)\)"\)',
                      plot)
        self.assertIsNotNone(m, "FIGURE_FILE's pattern not found in txbatch-plot")
        stems, formats = m.group(1).split("|"), m.group(2).split("|")
        self.assertIn("bufferbloat", stems)
        # The source tree's (this file's), not the build tree's copy of txbatch-plot's folder.
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "tools", "figures.cc")) as f:
            cc = f.read()

        def listed(name):
            m = re.search(name + r"\[\] = \{([^}]*)\}", cc)
            self.assertIsNotNone(m, f"{name} not found in figures.cc")
            return re.findall(r'"([^"]*)"', m.group(1))
        self.assertEqual(sorted(listed("kFigureStems")), sorted(stems))
        self.assertEqual(sorted(listed("kFigureFormats")), sorted(formats))
        # What a sweep draws (svg and png; never compare) the `drew` line can name.
        files = listed("kFigureFiles")
        for stem in set(stems) - {"compare"}:
            for ext in ("svg", "png"):
                self.assertIn(f"{stem}.{ext}", files)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
