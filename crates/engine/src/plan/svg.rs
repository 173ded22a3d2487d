//! Power-versus-n curves of several mechanisms in one SVG chart.
//!
//! The chart is rendered into a `String` (the engine does no I/O); the caller writes it.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::EngineError;

use super::alternative::Hypotheses;
use super::detection::Detection;
use super::noncentrality::PlanMechanism;
use super::power::{asymptotic_power, required_n};

const WIDTH: u32 = 960;
const CHART_HEIGHT: u32 = 560;
const LEGEND_ROW: u32 = 26;
const POINTS: usize = 120;
/// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
const COLOURS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];
const GREY: RGBColor = RGBColor(110, 110, 110);

fn plot_error(e: impl std::fmt::Display) -> EngineError {
    EngineError::Plot(e.to_string())
}

/// The n range that shows every curve rising: from half the smallest n at which any
/// mechanism reaches 15% of the way from α to 1, to twice the largest n at which any
/// reaches 99% of the way, widened to keep `mark_n` well inside.
fn n_range(
    mechanisms: &[PlanMechanism],
    h: &Hypotheses,
    alpha: f64,
    mark_n: Option<u64>,
) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for &m in mechanisms {
        let first = required_n(m, h, alpha, alpha + 0.15 * (1.0 - alpha));
        let last = required_n(m, h, alpha, alpha + 0.99 * (1.0 - alpha));
        if let (Ok(first), Ok(last)) = (first, last) {
            lo = lo.min(first as f64 / 2.0);
            hi = hi.max(last as f64 * 2.0);
        }
    }
    if let Some(n) = mark_n {
        lo = lo.min(n as f64 / 3.0);
        hi = hi.max(n as f64 * 3.0);
    }
    if !(lo.is_finite() && hi > 0.0) {
        return (1.0, 1e6);
    }
    let lo = lo.max(1.0);
    (lo, hi.max(lo * 10.0))
}

/// Grid positions `1..9 × 10^k` inside `[lo, hi]`, each with its label or none: labels at
/// 1, 2 and 5 × 10^k, or only at powers of ten when the axis spans more than four decades.
fn log_ticks(lo: f64, hi: f64) -> Vec<(f64, Option<String>)> {
    let decades = (hi / lo).log10();
    let labelled: &[u32] = if decades > 4.0 { &[1] } else { &[1, 2, 5] };
    let mut ticks = Vec::new();
    let mut power = 10f64.powf(lo.log10().floor());
    while power <= hi {
        for mantissa in 1..=9u32 {
            let n = power * f64::from(mantissa);
            if n >= lo && n <= hi {
                let label = labelled.contains(&mantissa).then(|| format_n(n));
                ticks.push((n, label));
            }
        }
        power *= 10.0;
    }
    ticks
}

/// `n` in k/M/G/T units: round values only, as [`log_ticks`] produces.
fn format_n(n: f64) -> String {
    let (value, unit) = match n {
        n if n >= 1e15 => return format!("{n:.0e}"),
        n if n >= 1e12 => (n / 1e12, "T"),
        n if n >= 1e9 => (n / 1e9, "G"),
        n if n >= 1e6 => (n / 1e6, "M"),
        n if n >= 1e3 => (n / 1e3, "k"),
        n => (n, ""),
    };
    format!("{}{unit}", value.round())
}

fn legend_label(m: PlanMechanism, df: u32) -> String {
    let privacy = match m {
        PlanMechanism::Gauss { rho } => format!("rho = {rho}"),
        PlanMechanism::Grr { epsilon }
        | PlanMechanism::BitFlip { epsilon }
        | PlanMechanism::Oue { epsilon }
        | PlanMechanism::Subset { epsilon }
        | PlanMechanism::Olh { epsilon }
        | PlanMechanism::Hadamard { epsilon } => format!("eps = {epsilon}"),
    };
    format!("{} / {} ({privacy}, df {df})", m.name(), m.test_name())
}

/// A legend entry: its text, line style and whether the line is dashed.
type LegendEntry = (String, ShapeStyle, bool);

/// The legend in two columns under the plot area, aligned with its left edge.
fn draw_legend(
    lower: &DrawingArea<SVGBackend<'_>, Shift>,
    legend: Vec<LegendEntry>,
) -> Result<(), EngineError> {
    let font = ("sans-serif", 15).into_font();
    for (i, (label, style, dashed)) in legend.into_iter().enumerate() {
        let x = 84 + 440 * (i as i32 % 2);
        let y = 10 + LEGEND_ROW as i32 * (i as i32 / 2) + LEGEND_ROW as i32 / 2;
        let segments: Vec<(i32, i32)> = if dashed {
            vec![(0, 8), (12, 20), (24, 32)]
        } else {
            vec![(0, 32)]
        };
        for (a, b) in segments {
            lower
                .draw(&PathElement::new(vec![(x + a, y), (x + b, y)], style))
                .map_err(plot_error)?;
        }
        lower
            .draw(&Text::new(label, (x + 42, y - 8), font.clone()))
            .map_err(plot_error)?;
    }
    Ok(())
}

/// An SVG chart of the asymptotic power of each mechanism's level-`alpha` identity test
/// against n (log scale), one curve per mechanism, a dashed horizontal line at `target`
/// power and a dotted vertical line at `mark_n` when given, and a legend under the chart
/// (so that it never hides a curve). `sequential`, when not empty, holds each mechanism's
/// simulated sequential test (same order): drawn dashed in the mechanism's colour as the
/// share of streams it has detected by n, comparable with the fixed-n power at n.
pub fn power_svg(
    mechanisms: &[PlanMechanism],
    h: &Hypotheses,
    alpha: f64,
    target: Option<f64>,
    mark_n: Option<u64>,
    sequential: &[Detection],
) -> Result<String, EngineError> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(EngineError::invalid("alpha", alpha, "a number in (0, 1)"));
    }
    let (lo, hi) = n_range(mechanisms, h, alpha, mark_n);
    let grid: Vec<f64> = (0..POINTS)
        .map(|i| lo * (hi / lo).powf(i as f64 / (POINTS - 1) as f64))
        .collect();
    let mut curves = Vec::with_capacity(mechanisms.len());
    for &m in mechanisms {
        let unit = m.unit_noncentrality(h)?;
        let df = m.df(h.domain());
        let points: Vec<(f64, f64)> = grid
            .iter()
            .map(|&n| (n, asymptotic_power(df, n * unit, alpha)))
            .collect();
        curves.push((legend_label(m, df), points));
    }

    let sequential_curves: Vec<(String, Vec<(f64, f64)>)> = mechanisms
        .iter()
        .zip(sequential)
        .map(|(m, d)| {
            (
                format!("{}: sequential, share detected by n", m.name()),
                grid.iter().map(|&n| (n, d.detected_by(n))).collect(),
            )
        })
        .collect();
    let mut legend: Vec<LegendEntry> = Vec::new();
    let entries = curves.len()
        + sequential_curves.len()
        + usize::from(target.is_some())
        + usize::from(mark_n.is_some());
    let legend_height = LEGEND_ROW * entries.div_ceil(2) as u32 + 20;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, CHART_HEIGHT + legend_height))
            .into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (upper, lower) = root.split_vertically(CHART_HEIGHT);
        let caption = format!(
            "Asymptotic power of identity tests: d = {}, alpha = {alpha}, TV(p0, p1) = {:.4}",
            h.domain(),
            h.tv_distance()
        );
        let mut chart = ChartBuilder::on(&upper)
            .caption(caption, ("sans-serif", 22))
            .margin(20)
            .x_label_area_size(56)
            .y_label_area_size(64)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)
            .map_err(plot_error)?;
        // plotters' own log-axis ticks repeat every power of ten, so the x grid and its
        // labels are drawn here instead.
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_label_formatter(&|_| String::new())
            .x_desc("reports n (log scale)")
            .y_desc("power")
            .y_label_formatter(&|p| format!("{p:.1}"))
            .y_labels(11)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 17))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(plot_error)?;
        let tick_font =
            TextStyle::from(("sans-serif", 15).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        for (n, label) in log_ticks(lo, hi) {
            let colour = if label.is_some() {
                RGBColor(205, 205, 205)
            } else {
                RGBColor(236, 236, 236)
            };
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(n, 0.0), (n, 1.0)],
                    colour.stroke_width(1),
                )))
                .map_err(plot_error)?;
            if let Some(label) = label {
                let (x, y) = chart.backend_coord(&(n, 0.0));
                upper
                    .draw(&PathElement::new(vec![(x, y), (x, y + 5)], BLACK))
                    .map_err(plot_error)?;
                upper
                    .draw(&Text::new(label, (x, y + 8), tick_font.clone()))
                    .map_err(plot_error)?;
            }
        }

        for (i, (label, points)) in curves.into_iter().enumerate() {
            let style = COLOURS[i % COLOURS.len()].stroke_width(3);
            chart
                .draw_series(LineSeries::new(points, style))
                .map_err(plot_error)?;
            legend.push((label, style, false));
        }
        for (i, (label, points)) in sequential_curves.into_iter().enumerate() {
            let style = COLOURS[i % COLOURS.len()].stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(points, 7, 5, style))
                .map_err(plot_error)?;
            legend.push((label, style, true));
        }
        if let Some(t) = target {
            let style = BLACK.stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(vec![(lo, t), (hi, t)], 10, 6, style))
                .map_err(plot_error)?;
            legend.push((format!("target power {t}"), style, true));
        }
        if let Some(n) = mark_n {
            let style = GREY.stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(n as f64, 0.0), (n as f64, 1.0)],
                    4,
                    4,
                    style,
                ))
                .map_err(plot_error)?;
            legend.push((format!("n = {n}"), style, true));
        }

        draw_legend(&lower, legend)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Alternative;

    #[test]
    fn log_ticks_label_round_values() {
        let ticks = log_ticks(700.0, 60_000.0);
        let labels: Vec<&str> = ticks.iter().filter_map(|(_, l)| l.as_deref()).collect();
        assert_eq!(labels, ["1k", "2k", "5k", "10k", "20k", "50k"]);
        assert_eq!(ticks.first().map(|t| t.0), Some(700.0));
        let ticks = log_ticks(3.0, 3e7);
        let labels: Vec<&str> = ticks.iter().filter_map(|(_, l)| l.as_deref()).collect();
        assert_eq!(labels, ["10", "100", "1k", "10k", "100k", "1M", "10M"]);
    }

    #[test]
    fn svg_has_every_curve_and_the_target() {
        let h = Alternative::Paninski { distance: 0.2 }
            .against(&[0.125; 8])
            .unwrap();
        let mechanisms = PlanMechanism::all(1.0);
        let svg = power_svg(&mechanisms, &h, 0.05, Some(0.8), Some(3000), &[]).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        for m in mechanisms {
            let label = format!("{} / {}", m.name(), m.test_name());
            assert!(svg.contains(&label), "{label} missing");
        }
        for text in [
            "target power 0.8",
            "n = 3000",
            "reports n (log scale)",
            "power",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(power_svg(&mechanisms, &h, 1.5, None, None, &[]).is_err());
    }

    /// With the sequential tests, each gets a dashed share-detected curve that rises
    /// from 0 to about 1 over the chart's n range.
    #[test]
    fn svg_plots_the_sequential_tests_beside_the_fixed_n_power() {
        let h = Alternative::Paninski { distance: 0.2 }
            .against(&[1.0 / 16.0; 16])
            .unwrap();
        let mechanisms = [
            PlanMechanism::Grr { epsilon: 1.0 },
            PlanMechanism::BitFlip { epsilon: 1.0 },
        ];
        let detections: Vec<Detection> = mechanisms
            .iter()
            .map(|&m| {
                super::super::sequential_detection(m, &h, 0.05, 0.8, 1, Default::default()).unwrap()
            })
            .collect();
        for d in &detections {
            assert_eq!(d.detected_by(0.0), 0.0);
            assert!((d.detected_by(d.median) - 0.5).abs() < 0.01, "{}", d.median);
            assert!(d.detected_by(1e12) > 0.95);
        }
        let svg = power_svg(&mechanisms, &h, 0.05, Some(0.8), None, &detections).unwrap();
        for m in mechanisms {
            let label = format!("{}: sequential, share detected by n", m.name());
            assert!(svg.contains(&label), "{label} missing");
        }
    }
}
