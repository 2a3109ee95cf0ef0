//! The bench's chart, as a self-contained SVG: wall time against K for
//! each method (one panel per cost model, the modelled one labelled so) and
//! runlist updates against K.

use std::{fmt::Write, path::Path};

use crate::{
    bench::{Results, Row, BATCH, DEBUGGER, FREEZE, SINGLES},
    CliResult, Done,
};

const PANEL_W: f64 = 420.0;
const PANEL_H: f64 = 300.0;
const MARGIN: f64 = 60.0;

struct Series {
    name: String,
    color: &'static str,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (0.0, 1.0);
    }
    (
        lo.log10().floor(),
        hi.log10().ceil().max(lo.log10().floor() + 1.0),
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One log-log panel with its top-left corner at (`x0`, `y0`).
fn panel(svg: &mut String, x0: f64, y0: f64, title: &str, y_label: &str, series: &[Series]) {
    let (xl, xh) = log_range(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let (yl, yh) = log_range(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let px = |x: f64| x0 + MARGIN + (x.log10() - xl) / (xh - xl) * (PANEL_W - MARGIN - 10.0);
    let py =
        |y: f64| y0 + PANEL_H - 40.0 - (y.max(1e-9).log10() - yl) / (yh - yl) * (PANEL_H - 80.0);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" font-size="13" font-weight="bold">{}</text>"#,
        x0 + 10.0,
        y0 + 18.0,
        esc(title)
    );
    let (left, right) = (x0 + MARGIN, x0 + PANEL_W - 10.0);
    let (top, bottom) = (y0 + 40.0, y0 + PANEL_H - 40.0);
    let _ = writeln!(
        svg,
        r##"<rect x="{left}" y="{top}" width="{}" height="{}" fill="none" stroke="#888"/>"##,
        right - left,
        bottom - top
    );
    for e in (yl as i32)..=(yh as i32) {
        let y = py(10f64.powi(e));
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{y}" x2="{right}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" font-size="10" text-anchor="end">1e{e}</text>"##,
            left - 4.0,
            y + 3.0
        );
    }
    let mut k = 10f64.powf(xl);
    while k <= 10f64.powf(xh) * 1.0001 {
        let x = px(k);
        let _ = writeln!(
            svg,
            r#"<text x="{x}" y="{}" font-size="10" text-anchor="middle">{}</text>"#,
            bottom + 14.0,
            k
        );
        k *= 4.0;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" font-size="11" text-anchor="middle">queues K</text>"#,
        (left + right) / 2.0,
        bottom + 30.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" font-size="11" transform="rotate(-90 {} {})" text-anchor="middle">{}</text>"#,
        x0 + 14.0,
        (top + bottom) / 2.0,
        x0 + 14.0,
        (top + bottom) / 2.0,
        esc(y_label)
    );
    for (i, s) in series.iter().enumerate() {
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let dash = if s.dashed {
            r#" stroke-dasharray="5,4""#
        } else {
            ""
        };
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
            pts.join(" "),
            s.color
        );
        for (x, y) in &s.points {
            let _ = writeln!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                px(*x),
                py(*y),
                s.color
            );
        }
        let ly = top + 12.0 + 14.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}" font-size="11">{}</text>"#,
            left + 8.0,
            left + 28.0,
            s.color,
            left + 32.0,
            ly + 4.0,
            esc(&s.name)
        );
    }
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
const METHODS: [(&str, &str, &str); 4] = [
    (BATCH, "one PREEMPT batch of K", "#1b9e77"),
    (SINGLES, "K single-entry PREEMPTs", "#d95f02"),
    (FREEZE, "P FREEZEs", "#7570b3"),
    (DEBUGGER, "P debugger SUSPEND_QUEUES", "#e7298a"),
];

/// One series per method: `value` of each row of `cost` at `p`, against K.
fn method_series(r: &Results, cost: &str, p: u32, value: fn(&Row) -> f64) -> Vec<Series> {
    METHODS
        .iter()
        .map(|(m, name, color)| Series {
            name: name.to_string(),
            color,
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
pub(crate) fn svg(r: &Results) -> String {
    let p = chosen_p(r);
    let panels = r.cost_models.len() + 1;
    let width = PANEL_W * panels as f64;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="15" font-weight="bold">kfd-preempt bench: taking K queues spread over P={p} processes off {} {} node</text>
<text x="10" y="38" font-size="11">{}</text>
"#,
        PANEL_H + 50.0,
        if r.label.is_empty() {
            "a simulated"
        } else {
            "an"
        },
        r.node_mode.to_uppercase(),
        esc(&if r.label.is_empty() {
            r.environment.clone()
        } else {
            format!("{}: {}", r.label, r.environment)
        })
    );
    for (i, cost) in r.cost_models.iter().enumerate() {
        let mut series = method_series(r, &cost.name, p, |row| row.p50_us);
        if let Some(f) = r.floor.iter().find(|f| f.cost_model == cost.name) {
            let ks: Vec<f64> = series[0].points.iter().map(|pt| pt.0).collect();
            series.push(Series {
                name: "null ioctl (INFO) floor".into(),
                color: "#666",
                dashed: true,
                points: ks.iter().map(|k| (*k, f.p50_us)).collect(),
            });
        }
        let title = if cost.modelled {
            format!("MODELLED cost ({}): p50 wall time", cost.name)
        } else {
            "cost model off (software overhead): p50 wall time".to_string()
        };
        let mut sub = String::new();
        panel(
            &mut sub,
            PANEL_W * i as f64,
            50.0,
            &title,
            "microseconds",
            &series,
        );
        svg += &sub;
        if cost.modelled {
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}" font-size="9">{}</text>"#,
                PANEL_W * i as f64 + 10.0,
                PANEL_H + 45.0,
                esc(&cost.label)
            );
        }
    }
    if let Some(first) = r.cost_models.first() {
        let series = method_series(r, &first.name, p, |row| row.runlist_updates.max(1) as f64);
        let mut sub = String::new();
        panel(
            &mut sub,
            PANEL_W * r.cost_models.len() as f64,
            50.0,
            "runlist updates per operation",
            "updates (HWS cycles or MES calls)",
            &series,
        );
        svg += &sub;
    }
    svg += "</svg>\n";
    svg
}

pub(crate) fn from_file(input: &Path, output: &Path) -> CliResult {
    let text = std::fs::read_to_string(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let results: Results = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a bench JSON: {e}", input.display()))?;
    std::fs::write(output, svg(&results)).map_err(|e| format!("{}: {e}", output.display()))?;
    Ok(Done::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{CostModel, Floor};

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
            }],
            rows,
        }
    }

    #[test]
    fn svg_has_every_series_and_escapes_text() {
        let s = svg(&results());
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        // Three methods + floor in the time panel, three in the updates one.
        assert_eq!(s.matches("<polyline").count(), 7);
        // Four K values per method series: 4 points x 7 series.
        assert_eq!(s.matches("<circle").count(), 28);
        assert!(s.contains("test &lt;env&gt;") && !s.contains("<env>"));
        assert!(s.contains("P=8"));
    }

    #[test]
    fn modelled_panels_are_labelled() {
        let mut r = results();
        r.cost_models[0].modelled = true;
        r.cost_models[0].label = "MODELLED, not measured".into();
        let s = svg(&r);
        assert!(s.contains("MODELLED cost") && s.contains("MODELLED, not measured"));
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
