//! The bench's chart, as SVG drawn by the `plotters` crate's SVG backend:
//! p50 wall time against K at P = 8 (or the nearest P measured) for each
//! method, one panel per cost model with the INFO floor drawn in (the
//! modelled cost's panel says MODELLED in its title and under it), and
//! runlist updates against K. Both axes are logarithmic.

use std::{ops::Range, path::Path};

use plotters::{coord::Shift, prelude::*};

use crate::bench_results::{Results, Row, BATCH, DEBUGGER, FREEZE, SINGLES};

const PANEL_W: u32 = 480;
const PANEL_H: u32 = 340;
/// The chart's title, above the environment's lines.
const TITLE_H: u32 = 30;
/// One line of the environment, and of a modelled cost's label.
const LINE_H: u32 = 15;
/// Characters of the environment's 13-point text per pixel of width.
const CHARS_PER_PX: f64 = 1.0 / 6.5;
/// Room under the panels for a modelled cost's label.
const FOOTER_H: u32 = 40;
const FONT: &str = "sans-serif";

struct Series {
    name: String,
    color: RGBColor,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// Whole decades holding every positive value (1..10 if there is none).
fn decades(values: impl Iterator<Item = f64>) -> Range<f64> {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return 1.0..10.0;
    }
    let (lo, hi) = (lo.log10().floor(), hi.log10().ceil());
    10f64.powf(lo)..10f64.powf(hi.max(lo + 1.0))
}

/// A tick label: integers as such, fractions to their first two
/// significant digits (0.1, 0.25, 0.001).
fn tick(v: &f64) -> String {
    if *v >= 1.0 {
        format!("{v:.0}")
    } else if *v > 0.0 {
        let decimals = (-v.log10()).ceil() as usize + 1;
        let s = format!("{v:.decimals$}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        "0".into()
    }
}

/// A chart error, as the bench reports errors.
fn drawing<E: std::fmt::Display>(e: E) -> String {
    format!("drawing the chart: {e}")
}

/// Wraps `text` into lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// One log-log panel: `series` against K, with a legend.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), String> {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let mut ks: Vec<f64> = points().map(|p| p.0).filter(|k| *k > 0.0).collect();
    ks.sort_by(f64::total_cmp);
    ks.dedup();
    // The measured Ks are the x ticks, with room either side.
    let (k_lo, k_hi) = match (ks.first(), ks.last()) {
        (Some(lo), Some(hi)) => (lo / 1.5, hi * 1.5),
        _ => (1.0, 10.0),
    };
    let x = LogCoord::from((k_lo..k_hi).log_scale()).with_key_points(ks);
    // Ticks at whole decades, with room for the points at either end.
    let Range { start, end } = decades(points().map(|p| p.1));
    let y = (start / 1.5..end * 1.5).log_scale();
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 16).into_font().style(FontStyle::Bold))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc("queues K")
        .y_desc(y_label)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .draw()
        .map_err(drawing)?;
    for s in series {
        let style = s.color.stroke_width(2);
        let line = if s.dashed {
            chart.draw_series(DashedLineSeries::new(s.points.iter().copied(), 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(s.points.iter().copied(), style))
        }
        .map_err(drawing)?;
        line.label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart
            .draw_series(
                s.points
                    .iter()
                    .map(|p| Circle::new(*p, 3, s.color.filled())),
            )
            .map_err(drawing)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(0x88, 0x88, 0x88))
        .draw()
        .map_err(drawing)
}

/// The P the chart shows: 8 if measured, else the nearest.
fn chosen_p(r: &Results) -> u32 {
    r.rows
        .iter()
        .map(|row| row.p)
        .min_by_key(|p| (i64::from(*p) - 8).abs())
        .unwrap_or(8)
}

/// The methods compared, as the chart names and colours them.
const METHODS: [(&str, &str, RGBColor); 4] = [
    (BATCH, "one PREEMPT batch of K", RGBColor(0x1b, 0x9e, 0x77)),
    (
        SINGLES,
        "K single-entry PREEMPTs",
        RGBColor(0xd9, 0x5f, 0x02),
    ),
    (FREEZE, "P FREEZEs", RGBColor(0x75, 0x70, 0xb3)),
    (
        DEBUGGER,
        "P debugger SUSPEND_QUEUES",
        RGBColor(0xe7, 0x29, 0x8a),
    ),
];
/// The INFO floor's line.
const FLOOR: RGBColor = RGBColor(0x66, 0x66, 0x66);

/// One series per method: `value` of each row of `cost` at `p`, against K.
fn method_series(r: &Results, cost: &str, p: u32, value: fn(&Row) -> f64) -> Vec<Series> {
    METHODS
        .iter()
        .map(|(m, name, color)| Series {
            name: name.to_string(),
            color: *color,
            dashed: false,
            points: r
                .rows
                .iter()
                .filter(|row| row.cost_model == cost && row.p == p && row.method == *m)
                .map(|row| (f64::from(row.k), value(row)))
                .collect(),
        })
        // Batch always has points; the debugger only on hardware.
        .filter(|s| s.name == METHODS[0].1 || !s.points.is_empty())
        .collect()
}

/// The bench's results as SVG.
pub(crate) fn svg(r: &Results) -> Result<String, String> {
    let p = chosen_p(r);
    let panels = r.cost_models.len() + 1;
    let width = PANEL_W * panels as u32;
    let environment = wrap(
        &if r.label.is_empty() {
            r.environment.clone()
        } else {
            format!("{}: {}", r.label, r.environment)
        },
        (f64::from(width) * CHARS_PER_PX) as usize,
    );
    let header_h = TITLE_H + LINE_H * environment.len() as u32 + 8;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, header_h + PANEL_H + FOOTER_H))
            .into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let (header, body) = root.split_vertically(header_h);
        let title = format!(
            "kfd_preempt bench: taking K queues spread over P={p} processes off {} {} node",
            if r.label.is_empty() {
                "a simulated"
            } else {
                "an"
            },
            r.node_mode.to_uppercase()
        );
        header
            .draw(&Text::new(
                title,
                (10, 8),
                (FONT, 19).into_font().style(FontStyle::Bold),
            ))
            .map_err(drawing)?;
        for (n, line) in environment.iter().enumerate() {
            let y = (TITLE_H + LINE_H * n as u32) as i32;
            header
                .draw(&Text::new(line.as_str(), (10, y), (FONT, 13)))
                .map_err(drawing)?;
        }
        let (plots, footer) = body.split_vertically(PANEL_H);
        let areas = plots.split_evenly((1, panels));
        let notes = footer.split_evenly((1, panels));
        for (i, cost) in r.cost_models.iter().enumerate() {
            let mut series = method_series(r, &cost.name, p, |row| row.p50_us);
            if let Some(f) = r.floor.iter().find(|f| f.cost_model == cost.name) {
                let ks: Vec<f64> = series[0].points.iter().map(|pt| pt.0).collect();
                series.push(Series {
                    name: "null ioctl (INFO) floor".into(),
                    color: FLOOR,
                    dashed: true,
                    points: ks.iter().map(|k| (*k, f.p50_us)).collect(),
                });
            }
            let title = if cost.modelled {
                format!("MODELLED cost ({}): p50 wall time", cost.name)
            } else if cost.name == "zero" {
                "cost model off (software overhead): p50 wall time".to_string()
            } else {
                // --hardware: "measured".
                format!("{}: p50 wall time", cost.name)
            };
            panel(&areas[i], &title, "microseconds", &series)?;
            if cost.modelled {
                for (n, line) in wrap(&cost.label, 80).iter().enumerate() {
                    notes[i]
                        .draw(&Text::new(
                            line.as_str(),
                            (10, 4 + (LINE_H * n as u32) as i32),
                            (FONT, 12),
                        ))
                        .map_err(drawing)?;
                }
            }
        }
        if let Some(first) = r.cost_models.first() {
            let series = method_series(r, &first.name, p, |row| row.runlist_updates.max(1) as f64);
            panel(
                &areas[r.cost_models.len()],
                "runlist updates per operation",
                "updates (HWS cycles or MES calls)",
                &series,
            )?;
        }
        root.present().map_err(drawing)?;
    }
    Ok(out)
}

pub(crate) fn from_file(input: &Path, output: &Path) -> crate::Result<()> {
    let text = std::fs::read_to_string(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let results: Results = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a bench JSON: {e}", input.display()))?;
    std::fs::write(output, svg(&results)?).map_err(|e| format!("{}: {e}", output.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_results::{CostModel, Floor};

    fn results() -> Results {
        let mut rows = Vec::new();
        for k in [1u32, 4, 16, 64] {
            for (m, us, upd) in [
                (BATCH, 10.0, 1),
                (SINGLES, 10.0 * f64::from(k), u64::from(k)),
                (FREEZE, 30.0, 4),
            ] {
                rows.push(Row {
                    cost_model: "zero".into(),
                    k,
                    p: 8,
                    processes: k.min(8),
                    method: m.into(),
                    reps: 3,
                    p50_us: us,
                    p99_us: us * 2.0,
                    max_us: us * 3.0,
                    resume_p50_us: us,
                    resume_p99_us: us * 2.0,
                    resume_max_us: us * 3.0,
                    runlist_updates: upd,
                    module_p50_us: us / 2.0,
                    module_p99_us: us,
                    module_max_us: us,
                    overhead_p50_us: us / 2.0,
                });
            }
        }
        Results {
            schema: "kfd-preempt-bench/1".into(),
            environment: "test <env>".into(),
            label: String::new(),
            node: 0,
            node_mode: "hws".into(),
            cost_models: vec![CostModel {
                name: "zero".into(),
                modelled: false,
                label: "off".into(),
                cycle_ns: 0,
                per_queue_ns: 0,
                mes_call_ns: 0,
            }],
            floor: vec![Floor {
                cost_model: "zero".into(),
                samples: 10,
                p50_us: 2.0,
                p99_us: 3.0,
                empty_batch_p50_us: 0.0,
            }],
            rows,
        }
    }

    /// The point count of each polyline stroked in `color`, and the points
    /// (SVG pixels) of each data line (more than the legend's two points).
    fn lines(s: &str, color: RGBColor) -> (Vec<usize>, Vec<Vec<(i32, i32)>>) {
        let stroke = format!(
            r##"stroke="#{:02X}{:02X}{:02X}""##,
            color.0, color.1, color.2
        );
        let all: Vec<Vec<(i32, i32)>> = s
            .lines()
            .filter(|l| l.starts_with("<polyline") && l.contains(&stroke))
            .map(|l| {
                let points = l.split("points=\"").nth(1).unwrap().split('"').next();
                points
                    .unwrap()
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect()
            })
            .collect();
        let mut counts: Vec<usize> = all.iter().map(Vec::len).collect();
        counts.sort();
        (counts, all.into_iter().filter(|l| l.len() > 2).collect())
    }

    fn circles(s: &str, color: RGBColor) -> usize {
        let fill = format!(r##"fill="#{:02X}{:02X}{:02X}""##, color.0, color.1, color.2);
        s.lines()
            .filter(|l| l.starts_with("<circle") && l.contains(&fill))
            .count()
    }

    #[test]
    fn svg_has_every_series_and_escapes_text() {
        let s = svg(&results()).unwrap();
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        // Each method in the time panel and the updates panel: a line of
        // its four K values and a two-point legend line in each, and a
        // point per K.
        for (method, name, color) in &METHODS[..3] {
            assert_eq!(lines(&s, *color).0, [2, 2, 4, 4], "{method}");
            assert_eq!(circles(&s, *color), 8, "{method}");
            assert_eq!(s.matches(name).count(), 2, "{method}");
        }
        // No debugger rows, no debugger series.
        assert!(!s.contains(METHODS[3].1) && circles(&s, METHODS[3].2) == 0);
        // The INFO floor, dashed (many short lines), in the time panel only.
        assert_eq!(circles(&s, FLOOR), 4);
        assert!(lines(&s, FLOOR).0.len() > 4);
        assert_eq!(s.matches("null ioctl (INFO) floor").count(), 1);
        assert!(s.contains("test &lt;env&gt;") && !s.contains("<env>"));
        assert!(s.contains("P=8"));
    }

    #[test]
    fn lines_follow_the_data() {
        let s = svg(&results()).unwrap();
        let (_, batch) = lines(&s, METHODS[0].2);
        let (_, singles) = lines(&s, METHODS[1].2);
        // Time panel: K grows to the right; at K=1 both take 10 us, at K=64
        // the singles take 64 times longer (higher up, a smaller y).
        let (b, k) = (&batch[0], &singles[0]);
        assert!(b.windows(2).all(|w| w[0].0 < w[1].0), "{b:?}");
        assert_eq!(b[0].1, k[0].1);
        assert!(b.iter().all(|p| p.1 == b[0].1), "batch is flat: {b:?}");
        assert!(k[3].1 < b[3].1 && k.windows(2).all(|w| w[0].1 > w[1].1));
        // Updates panel, on the right of the time panel: one per batch.
        assert!(batch[1][0].0 > b[3].0);
        assert!(singles[1][3].1 < batch[1][3].1);
    }

    #[test]
    fn hardware_results_show_the_debugger_and_the_label() {
        let mut r = results();
        r.label = "MI300X <gfx942> & MEC 0x9b; Linux 6.8".into();
        r.cost_models[0].name = "measured".into();
        r.floor.clear();
        let mut debugger: Vec<Row> = r
            .rows
            .iter()
            .filter(|x| x.method == FREEZE)
            .cloned()
            .collect();
        debugger.iter_mut().for_each(|x| x.method = DEBUGGER.into());
        r.rows.extend(debugger);
        r.rows
            .iter_mut()
            .for_each(|x| x.cost_model = "measured".into());
        let s = svg(&r).unwrap();
        assert_eq!(circles(&s, METHODS[3].2), 8);
        assert_eq!(s.matches(METHODS[3].1).count(), 2);
        assert!(s.contains("measured: p50 wall time") && !s.contains("cost model off"));
        assert!(s.contains("off an HWS node"));
        assert!(s.contains("MI300X &lt;gfx942&gt; &amp; MEC 0x9b; Linux 6.8: test &lt;env&gt;"));
        // No floor measured, none drawn.
        assert_eq!(circles(&s, FLOOR), 0);
    }

    #[test]
    fn axes_ticks_and_notes() {
        assert_eq!(decades([0.9, 1100.0].into_iter()), 0.1..10_000.0);
        assert_eq!(decades([5.0].into_iter()), 1.0..10.0);
        assert_eq!(decades(std::iter::empty()), 1.0..10.0);
        assert_eq!(
            [
                tick(&1024.0),
                tick(&0.1),
                tick(&0.25),
                tick(&0.001),
                tick(&1e6)
            ],
            ["1024", "0.1", "0.25", "0.001", "1000000"]
        );
        assert_eq!(
            wrap("MODELLED, not measured: a b", 13),
            ["MODELLED, not", "measured: a b"]
        );
        let mut r = results();
        assert_eq!(chosen_p(&r), 8);
        r.rows.iter_mut().for_each(|row| row.p = 6 + row.k % 5);
        assert_eq!(chosen_p(&r), 7);
    }

    #[test]
    fn modelled_panels_are_labelled() {
        let mut r = results();
        r.cost_models[0].modelled = true;
        r.cost_models[0].label = "MODELLED, not measured".into();
        let s = svg(&r).unwrap();
        assert!(s.contains("MODELLED cost (zero): p50 wall time"));
        assert!(s.contains("MODELLED, not measured"));
        // Unmodelled, neither the title nor the note says so.
        assert!(!svg(&results()).unwrap().contains("MODELLED"));
    }

    #[test]
    fn json_round_trips_through_the_chart_command() {
        let dir = std::env::temp_dir().join(format!("kfdp-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("b.json");
        std::fs::write(&json, serde_json::to_string(&results()).unwrap()).unwrap();
        assert!(from_file(&json, &dir.join("b.svg")).is_ok());
        assert!(std::fs::read_to_string(dir.join("b.svg"))
            .unwrap()
            .contains("<svg"));
        std::fs::write(&json, "{}").unwrap();
        assert!(from_file(&json, &dir.join("b.svg")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
