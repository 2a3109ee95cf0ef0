//! A small SVG chart of the LC latency per mode: P50/P99/P99.9 bars on the
//! left, the latency CDF on the right. Written by hand: a few rectangles,
//! lines and labels need no plotting library.

use std::fmt::Write;

use crate::report::Row;

/// The colour of each mode's CDF line, and of each percentile's bar.
const MODE_COLOURS: [&str; 3] = ["#2b8a3e", "#c92a2a", "#1864ab"];
const BAR_COLOURS: [&str; 3] = ["#a5d8ff", "#4dabf7", "#1864ab"];

const W: f64 = 960.0;
const H: f64 = 420.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 360.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" axis maximum at or above `v`: 1, 2 or 5 times a power of ten.
pub fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|x| *x >= v)
        .unwrap_or(10.0 * p)
}

fn text(out: &mut String, x: f64, y: f64, anchor: &str, size: u32, s: &str) {
    let _ = writeln!(
        out,
        r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" font-size="{size}">{}</text>"#,
        esc(s)
    );
}

fn line(out: &mut String, (x1, y1): (f64, f64), (x2, y2): (f64, f64), style: &str) {
    let _ = writeln!(
        out,
        r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" {style}/>"#
    );
}

/// A y axis from `BOTTOM` (0) to `TOP` (`max`) at `x`, ticks to `x_end`.
fn y_axis(out: &mut String, x: f64, x_end: f64, max: f64, label: &str) {
    for k in 0..=5 {
        let v = max * f64::from(k) / 5.0;
        let y = BOTTOM - (BOTTOM - TOP) * f64::from(k) / 5.0;
        line(out, (x, y), (x_end, y), r##"stroke="#e9ecef""##);
        text(out, x - 6.0, y + 4.0, "end", 11, &format!("{v}"));
    }
    line(out, (x, TOP), (x, BOTTOM), r#"stroke="black""#);
    line(out, (x, BOTTOM), (x_end, BOTTOM), r#"stroke="black""#);
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12" transform="rotate(-90 {:.1} {:.1})">{}</text>"#,
        x - 42.0,
        (TOP + BOTTOM) / 2.0,
        x - 42.0,
        (TOP + BOTTOM) / 2.0,
        esc(label)
    );
}

/// The chart: `rows` give the percentiles, `cdfs` each mode's latencies
/// (ms, any order) for the CDF, `predicted_p99_ms` a marker on the bars.
pub fn chart(rows: &[Row], cdfs: &[(&str, &[f64])], predicted_p99_ms: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    text(
        &mut out,
        W / 2.0,
        24.0,
        "middle",
        16,
        "LC request latency by mode (simulated node, modelled cost)",
    );

    // Left: bars.
    let (x0, x1) = (80.0, 440.0);
    let top_value = rows
        .iter()
        .flat_map(|r| [r.lc.p50_ms, r.lc.p99_ms, r.lc.p999_ms])
        .chain([predicted_p99_ms])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let max = nice_max(top_value);
    let y_of = |v: f64| BOTTOM - (BOTTOM - TOP) * (v / max).clamp(0.0, 1.0);
    y_axis(&mut out, x0, x1, max, "latency (ms)");
    let group = (x1 - x0) / rows.len().max(1) as f64;
    let bar = group / 4.5;
    for (g, r) in rows.iter().enumerate() {
        let gx = x0 + group * g as f64 + bar * 0.75;
        for (b, v) in [r.lc.p50_ms, r.lc.p99_ms, r.lc.p999_ms].iter().enumerate() {
            let x = gx + bar * b as f64;
            let y = y_of(*v);
            let _ = writeln!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} P{}: {v:.2} ms</title></rect>"#,
                bar * 0.9,
                BOTTOM - y,
                BAR_COLOURS[b],
                r.mode,
                ["50", "99", "99.9"][b]
            );
        }
        text(
            &mut out,
            gx + bar * 1.5,
            BOTTOM + 18.0,
            "middle",
            12,
            r.mode,
        );
    }
    if predicted_p99_ms.is_finite() {
        let y = y_of(predicted_p99_ms);
        line(
            &mut out,
            (x0, y),
            (x1, y),
            r##"stroke="#e8590c" stroke-dasharray="6 4""##,
        );
        text(
            &mut out,
            x1,
            y - 5.0,
            "end",
            11,
            &format!("model: no-daemon P99 {predicted_p99_ms:.1} ms"),
        );
    }
    for (b, name) in ["P50", "P99", "P99.9"].iter().enumerate() {
        let x = x0 + 10.0 + 70.0 * b as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{}"/>"#,
            BOTTOM + 30.0,
            BAR_COLOURS[b]
        );
        text(&mut out, x + 16.0, BOTTOM + 40.0, "start", 12, name);
    }

    // Right: CDF, latency on x.
    let (c0, c1) = (540.0, 920.0);
    let x_max = nice_max(
        cdfs.iter()
            .flat_map(|(_, l)| l.iter().copied())
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max),
    );
    for k in 0..=5 {
        let v = f64::from(k) / 5.0;
        let y = BOTTOM - (BOTTOM - TOP) * v;
        line(&mut out, (c0, y), (c1, y), r##"stroke="#e9ecef""##);
        text(&mut out, c0 - 6.0, y + 4.0, "end", 11, &format!("{v}"));
        let xv = x_max * f64::from(k) / 5.0;
        let x = c0 + (c1 - c0) * f64::from(k) / 5.0;
        text(&mut out, x, BOTTOM + 16.0, "middle", 11, &format!("{xv}"));
    }
    line(&mut out, (c0, TOP), (c0, BOTTOM), r#"stroke="black""#);
    line(&mut out, (c0, BOTTOM), (c1, BOTTOM), r#"stroke="black""#);
    text(
        &mut out,
        (c0 + c1) / 2.0,
        BOTTOM + 34.0,
        "middle",
        12,
        "latency (ms)",
    );
    text(&mut out, c0, TOP - 8.0, "start", 12, "fraction of requests");
    for (m, (name, lat)) in cdfs.iter().enumerate() {
        let mut sorted: Vec<f64> = lat.iter().copied().filter(|v| v.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let colour = MODE_COLOURS[m % MODE_COLOURS.len()];
        if n > 0 {
            let mut points = String::new();
            let mut prev_y = BOTTOM;
            for (k, v) in sorted.iter().enumerate() {
                let x = c0 + (c1 - c0) * (v / x_max).clamp(0.0, 1.0);
                let y = BOTTOM - (BOTTOM - TOP) * (k + 1) as f64 / n as f64;
                let _ = write!(points, "{x:.1},{prev_y:.1} {x:.1},{y:.1} ");
                prev_y = y;
            }
            let _ = writeln!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.5"/>"#,
                points.trim_end()
            );
        }
        let ly = TOP + 14.0 + 16.0 * m as f64;
        line(
            &mut out,
            (c1 - 110.0, ly - 4.0),
            (c1 - 90.0, ly - 4.0),
            &format!(r#"stroke="{colour}" stroke-width="2""#),
        );
        text(
            &mut out,
            c1 - 86.0,
            ly,
            "start",
            12,
            &format!("{name} (n={n})"),
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Tail;

    #[test]
    fn axis_maxima_are_round() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(262.0), 500.0);
        assert_eq!(nice_max(15.0), 20.0);
        assert_eq!(nice_max(100.0), 100.0);
        assert_eq!(nice_max(f64::NAN), 1.0);
    }

    #[test]
    fn the_chart_has_every_mode_and_the_caveat() {
        let t = Tail {
            p50_ms: 15.0,
            p99_ms: 16.0,
            p999_ms: 17.0,
        };
        let rows: Vec<Row> = ["alone", "together", "daemon"]
            .into_iter()
            .map(|mode| Row {
                mode,
                lc: t,
                be_throughput: 0.5,
                be_share: 1.0,
            })
            .collect();
        let lat = [15.0, 16.0, 17.0];
        let svg = chart(
            &rows,
            &[("alone", &lat), ("together", &[]), ("daemon", &lat)],
            262.0,
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("simulated node, modelled cost"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<title>").count(), 9);
        assert!(svg.contains("together (n=0)"));
    }
}
