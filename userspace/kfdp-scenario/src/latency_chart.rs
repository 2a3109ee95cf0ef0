//! The scenario's chart, as SVG drawn by the `plotters` crate's SVG
//! backend, as the bench's chart is (`chart.rs`): the LC request latency
//! per mode, P50/P99/P99.9 bars on the left (with the model's no-daemon P99
//! dashed across them), the latency CDF of each mode on the right.

use plotters::{
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use crate::report::Row;

const W: u32 = 960;
const H: u32 = 420;
const FONT: &str = "sans-serif";
const TITLE: &str = "LC request latency by mode (simulated node, modelled cost)";
/// Each percentile's bar.
const PERCENTILES: [(&str, RGBColor); 3] = [
    ("P50", RGBColor(0xa5, 0xd8, 0xff)),
    ("P99", RGBColor(0x4d, 0xab, 0xf7)),
    ("P99.9", RGBColor(0x18, 0x64, 0xab)),
];
/// Each mode's CDF line.
const MODE_COLOURS: [RGBColor; 3] = [
    RGBColor(0x2b, 0x8a, 0x3e),
    RGBColor(0xc9, 0x2a, 0x2a),
    RGBColor(0x18, 0x64, 0xab),
];
const MODEL: RGBColor = RGBColor(0xe8, 0x59, 0x0c);

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

fn drawing<E: std::fmt::Display>(e: E) -> String {
    format!("drawing the chart: {e}")
}

/// The steps of a CDF: for latencies `lat` (ms, any order), the points
/// (latency, fraction of requests at or below it).
fn cdf(lat: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = lat.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let mut points = Vec::with_capacity(2 * sorted.len());
    let mut prev = 0.0;
    for (k, v) in sorted.iter().enumerate() {
        let y = (k + 1) as f64 / n;
        points.push((*v, prev));
        points.push((*v, y));
        prev = y;
    }
    points
}

/// The chart: `rows` give the percentiles, `cdfs` each mode's latencies
/// (ms, any order) for the CDF, `predicted_p99_ms` the dashed line.
pub fn chart(
    rows: &[Row],
    cdfs: &[(&str, &[f64])],
    predicted_p99_ms: f64,
) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let root = root
            .titled(TITLE, (FONT, 16).into_font().style(FontStyle::Bold))
            .map_err(drawing)?;
        let (left, right) = root.split_horizontally(W / 2);
        bars(&left, rows, predicted_p99_ms)?;
        cdf_panel(&right, cdfs)?;
        root.present().map_err(drawing)?;
    }
    Ok(out)
}

/// Left: a group of three bars per mode.
fn bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
    predicted_p99_ms: f64,
) -> Result<(), String> {
    let top = rows
        .iter()
        .flat_map(|r| [r.lc.p50_ms, r.lc.p99_ms, r.lc.p999_ms])
        .chain([predicted_p99_ms])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let groups = rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..groups, 0.0..nice_max(top))
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("latency (ms)")
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 12))
        .draw()
        .map_err(drawing)?;
    // Each group's mode under its middle, in the label area.
    let under = TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    chart
        .draw_series(rows.iter().enumerate().map(|(g, r)| {
            EmptyElement::at((g as f64 + 0.5, 0.0)) + Text::new(r.mode, (0, 8), under.clone())
        }))
        .map_err(drawing)?;
    for (b, (name, colour)) in PERCENTILES.iter().enumerate() {
        chart
            .draw_series(rows.iter().enumerate().map(|(g, r)| {
                let v = [r.lc.p50_ms, r.lc.p99_ms, r.lc.p999_ms][b];
                let x = g as f64 + 0.15 + 0.24 * b as f64;
                Rectangle::new([(x, 0.0), (x + 0.22, v)], colour.filled())
            }))
            .map_err(drawing)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    if predicted_p99_ms.is_finite() {
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, predicted_p99_ms), (groups, predicted_p99_ms)],
                6,
                4,
                MODEL.stroke_width(1),
            ))
            .map_err(drawing)?
            .label(format!("model: no-daemon P99 {predicted_p99_ms:.1} ms"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], MODEL));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 12))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(0x88, 0x88, 0x88))
        .draw()
        .map_err(drawing)
}

/// Right: each mode's CDF, latency on x.
fn cdf_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    cdfs: &[(&str, &[f64])],
) -> Result<(), String> {
    let x_max = nice_max(
        cdfs.iter()
            .flat_map(|(_, l)| l.iter().copied())
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max),
    );
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..1.0)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc("latency (ms)")
        .y_desc("fraction of requests")
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 12))
        .draw()
        .map_err(drawing)?;
    for (m, (name, lat)) in cdfs.iter().enumerate() {
        let colour = MODE_COLOURS[m % MODE_COLOURS.len()];
        let style = colour.stroke_width(2);
        chart
            .draw_series(LineSeries::new(cdf(lat), style))
            .map_err(drawing)?
            .label(format!("{name} (n={})", lat.len()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 12))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(0x88, 0x88, 0x88))
        .draw()
        .map_err(drawing)
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
    fn a_cdf_steps_up_to_one_at_each_latency() {
        assert_eq!(
            cdf(&[3.0, 1.0, f64::NAN]),
            vec![(1.0, 0.0), (1.0, 0.5), (3.0, 0.5), (3.0, 1.0)]
        );
        assert!(cdf(&[]).is_empty());
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
        )
        .unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("simulated node, modelled cost"));
        for label in [
            "alone",
            "together",
            "daemon",
            "P50",
            "P99.9",
            "together (n=0)",
        ] {
            // plotters writes a text's content on a line of its own.
            assert!(
                svg.contains(&format!("\n{label}\n</text>")),
                "no label {label}"
            );
        }
        assert!(svg.contains("model: no-daemon P99 262.0 ms"));
        // Nine bars, one per mode and percentile, in the percentiles' colours.
        let bars: usize = PERCENTILES
            .iter()
            .map(|(_, c)| {
                svg.matches(&format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2))
                    .count()
            })
            .sum();
        assert_eq!(bars, 9 + 3, "nine bars and three legend boxes");
    }
}
