//! `--plot FILE.svg|FILE.png`: one picture, three panels on one time axis.
//!
//! 1. Breaker state: which of closed / half-open / open the breaker was in, probe ticks, and a
//!    red line where it opened, a green one where it closed. With several workers: the first
//!    worker's breaker, and every worker's probes.
//! 2. Upstream requests per time slice, stacked by outcome.
//! 3. Calls refused by the breaker, calls that gave up, and retries (waits) started.
//!
//! Drawn with `plotters` (SVG backend; PNG through its bitmap backend). Text is laid out with the
//! DejaVu Sans font embedded by the `dejavu` crate, so neither format needs a system font
//! library.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::chart::{Bucket, Class, Collector, Row};
use crate::error::CliError;
use crate::sim::Summary;

const W: u32 = 1200;
const H: u32 = 860;
const BARS: usize = 240;

const OK: RGBColor = RGBColor(46, 125, 50);
const ANSWER: RGBColor = RGBColor(21, 101, 192);
const RATE: RGBColor = RGBColor(239, 108, 0);
const FAIL: RGBColor = RGBColor(198, 40, 40);
const TIMEOUT: RGBColor = RGBColor(106, 27, 154);
const REFUSED: RGBColor = RGBColor(158, 158, 158);
const GAVE_UP: RGBColor = RGBColor(33, 33, 33);
const WAITS: RGBColor = RGBColor(30, 136, 229);
const CLOSED_C: RGBColor = RGBColor(102, 187, 106);
const HALF_C: RGBColor = RGBColor(255, 193, 7);
const OPEN_C: RGBColor = RGBColor(229, 57, 53);

static FONTS: Once = Once::new();

fn fonts() {
    FONTS.call_once(|| {
        // The embedded font always parses; if it ever did not, drawing reports the error.
        let _ = register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
        let _ = register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold());
    });
}

/// What one bar covers.
struct View {
    bars: Vec<Bucket>,
    /// Width of a bar in axis units.
    step: f64,
    /// Axis span in units.
    span: f64,
    /// ns per axis unit.
    unit_ns: f64,
    unit: &'static str,
}

fn view(c: &Collector) -> View {
    let end = c.end.max(1);
    let (unit_ns, unit) = if end <= 180_000_000_000 {
        (1e9, "seconds")
    } else if end <= 3 * 3_600_000_000_000 {
        (60e9, "minutes")
    } else {
        (3600e9, "hours")
    };
    let n = c.buckets.len().max(1);
    // A bar covers a round number of seconds when one fits the bucket width.
    let min_k = n.div_ceil(BARS).max(1) as u64;
    let nice_s: [u64; 22] = [
        1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
        172800, 604800,
    ];
    let k = nice_s
        .iter()
        .map(|s| s * 1_000_000_000)
        .filter(|ns| ns % c.width == 0)
        .map(|ns| ns / c.width)
        .find(|k| *k >= min_k && *k <= min_k * 3)
        .unwrap_or(min_k) as usize;
    let mut bars = Vec::with_capacity(n / k + 1);
    for chunk in c.buckets.chunks(k) {
        let mut b = Bucket::default();
        for x in chunk {
            b.merge(x);
        }
        bars.push(b);
    }
    let step = (c.width as f64 * k as f64) / unit_ns;
    View {
        span: (end as f64 / unit_ns).max(step * bars.len() as f64),
        bars,
        step,
        unit_ns,
        unit,
    }
}

/// Writes the chart to `path` (`.svg` or `.png`).
pub fn render(path: &Path, s: &Summary, c: &Collector) -> Result<(), CliError> {
    fonts();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::in_file(dir, format!("cannot create: {e}")))?;
    }
    let fail = |e: String| CliError::in_file(path, format!("cannot draw the chart: {e}"));
    match ext.as_str() {
        "svg" => {
            let root = SVGBackend::new(path, (W, H)).into_drawing_area();
            draw(&root, s, c).map_err(|e| fail(e.to_string()))?;
            root.present().map_err(|e| fail(e.to_string()))
        }
        "png" => {
            let root = BitMapBackend::new(path, (W, H)).into_drawing_area();
            draw(&root, s, c).map_err(|e| fail(e.to_string()))?;
            root.present().map_err(|e| fail(e.to_string()))
        }
        _ => Err(CliError::in_file(path, "the chart must be a .svg or .png file").field("--plot")),
    }
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, s: &Summary, c: &Collector) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let v = view(c);
    let (head, rest) = root.split_vertically(64);
    head.draw(&Text::new(
        format!("holdoff simulate: {}", s.scenario),
        (16, 8),
        ("sans-serif", 24)
            .into_font()
            .style(FontStyle::Bold)
            .color(&BLACK),
    ))?;
    let line = format!(
        "{} upstream requests  ·  {} refused  ·  {} open{}, {} close{} ({} premature)  ·  {} probes  ·  {} give-ups   [config: {}]",
        s.upstream_requests,
        s.refused,
        s.opens,
        if s.opens == 1 { "" } else { "s" },
        s.closes,
        if s.closes == 1 { "" } else { "s" },
        s.premature_closes,
        s.probes,
        s.give_ups,
        s.config
    );
    let line = if crate::report::is_fleet(s) {
        format!("{} workers ({})  ·  {line}", s.workers, s.fleet)
    } else {
        line
    };
    head.draw(&Text::new(
        line,
        (16, 38),
        ("sans-serif", 15).into_font().color(&RGBColor(60, 60, 60)),
    ))?;

    let panels = rest.split_by_breakpoints([] as [i32; 0], [170, 470]);
    let label_w = 96;
    let xs = |i: usize| i as f64 * v.step;
    let marker_x = |t: u64| t as f64 / v.unit_ns;

    // 1. State.
    {
        let area = &panels[0];
        let caption = if crate::report::is_fleet(s) {
            format!(
                "Breaker state of worker 0 of {}  (black ticks: every worker's probes; red line: opened, green line: closed)",
                s.workers
            )
        } else {
            "Breaker state  (black ticks: probes; red line: opened, green line: closed)".to_string()
        };
        let mut ch = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 16))
            .margin_left(10)
            .margin_right(24)
            .margin_top(4)
            .y_label_area_size(label_w)
            .x_label_area_size(0)
            .build_cartesian_2d(0f64..v.span, (0i32..3i32).into_segmented())?;
        ch.configure_mesh()
            .disable_mesh()
            .y_labels(3)
            .y_label_style(("sans-serif", 14))
            .y_label_formatter(&|y| match y {
                SegmentValue::CenterOf(0) => "closed".into(),
                SegmentValue::CenterOf(1) => "half-open".into(),
                SegmentValue::CenterOf(2) => "open".into(),
                _ => String::new(),
            })
            .draw()?;
        if c.has_breaker {
            for (row, color) in [
                (Row::Closed, CLOSED_C),
                (Row::HalfOpen, HALF_C),
                (Row::Open, OPEN_C),
            ] {
                let r = row as i32;
                ch.draw_series(
                    v.bars
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| b.shows(row))
                        .map(|(i, _)| {
                            Rectangle::new(
                                [
                                    (xs(i), SegmentValue::Exact(r)),
                                    ((xs(i + 1)).min(v.span), SegmentValue::Exact(r + 1)),
                                ],
                                color.filled(),
                            )
                        }),
                )?;
            }
            ch.draw_series(
                v.bars
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.probes > 0)
                    .map(|(i, _)| {
                        let x = xs(i) + v.step / 2.0;
                        PathElement::new(
                            vec![(x, SegmentValue::Exact(1)), (x, SegmentValue::CenterOf(1))],
                            BLACK.stroke_width(2),
                        )
                    }),
            )?;
            for (ts, color) in [(&c.opens, OPEN_C), (&c.closes, OK)] {
                ch.draw_series(ts.iter().map(|t| {
                    let x = marker_x(*t);
                    PathElement::new(
                        vec![(x, SegmentValue::Exact(0)), (x, SegmentValue::Exact(3))],
                        color.stroke_width(2),
                    )
                }))?;
            }
        } else {
            ch.draw_series(std::iter::once(Text::new(
                "no breaker configured (budget only)",
                (v.span * 0.02, SegmentValue::CenterOf(1)),
                ("sans-serif", 16).into_font().color(&RGBColor(90, 90, 90)),
            )))?;
        }
    }

    // 2. Upstream requests by outcome.
    {
        let classes = [
            (Class::Success, OK, "ok (2xx)"),
            (Class::Answer, ANSWER, "answer (4xx, e.g. 404)"),
            (Class::RateLimited, RATE, "rate-limited (Retry-After)"),
            (Class::Failure, FAIL, "failed"),
            (Class::Timeout, TIMEOUT, "timed out"),
        ];
        let ymax = headroom(v.bars.iter().map(Bucket::total_requests));
        let area = &panels[1];
        let mut ch = ChartBuilder::on(area)
            .caption(
                format!(
                    "Upstream requests per {} (stacked by outcome)",
                    per(v.step, v.unit)
                ),
                ("sans-serif", 16),
            )
            .margin_left(10)
            .margin_right(24)
            .margin_top(6)
            .y_label_area_size(label_w)
            .x_label_area_size(0)
            .build_cartesian_2d(0f64..v.span, 0f64..ymax)?;
        ch.configure_mesh()
            .disable_x_mesh()
            .y_labels(5)
            .y_label_style(("sans-serif", 13))
            .y_label_formatter(&int_label)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (k, (class, color, label)) in classes.iter().enumerate() {
            let below = |b: &Bucket| (0..k).map(|j| b.requests[classes[j].0 as usize]).sum::<u64>() as f64;
            let any = v.bars.iter().any(|b| b.requests[*class as usize] > 0);
            let series = ch.draw_series(
                v.bars
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.requests[*class as usize] > 0)
                    .map(|(i, b)| {
                        let y0 = below(b);
                        let y1 = y0 + b.requests[*class as usize] as f64;
                        Rectangle::new([(xs(i), y0), ((xs(i + 1)).min(v.span), y1)], color.filled())
                    }),
            )?;
            if any {
                let color = *color;
                series
                    .label(*label)
                    .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
            }
        }
        markers(&mut ch, c, &v, ymax)?;
        legend(&mut ch)?;
    }

    // 3. Refusals, give-ups and waits.
    {
        let ymax = headroom(v.bars.iter().map(|b| (b.refused + b.gave_up).max(b.waits)));
        let area = &panels[2];
        let mut ch = ChartBuilder::on(area)
            .caption(
                format!(
                    "Calls refused by the breaker, gave up, retries started (per {})",
                    per(v.step, v.unit)
                ),
                ("sans-serif", 16),
            )
            .margin_left(10)
            .margin_right(24)
            .margin_top(6)
            .margin_bottom(8)
            .y_label_area_size(label_w)
            .x_label_area_size(46)
            .build_cartesian_2d(0f64..v.span, 0f64..ymax)?;
        ch.configure_mesh()
            .disable_x_mesh()
            .y_labels(5)
            .x_labels(12)
            .y_label_style(("sans-serif", 13))
            .x_label_style(("sans-serif", 13))
            .y_label_formatter(&int_label)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .x_desc(format!("virtual time ({})", v.unit))
            .axis_desc_style(("sans-serif", 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        let any_ref = v.bars.iter().any(|b| b.refused > 0);
        let s1 = ch.draw_series(
            v.bars
                .iter()
                .enumerate()
                .filter(|(_, b)| b.refused > 0)
                .map(|(i, b)| {
                    Rectangle::new(
                        [(xs(i), 0.0), ((xs(i + 1)).min(v.span), b.refused as f64)],
                        REFUSED.filled(),
                    )
                }),
        )?;
        if any_ref {
            s1.label("refused by the breaker")
                .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], REFUSED.filled()));
        }
        let any_gu = v.bars.iter().any(|b| b.gave_up > 0);
        let s2 = ch.draw_series(
            v.bars
                .iter()
                .enumerate()
                .filter(|(_, b)| b.gave_up > 0)
                .map(|(i, b)| {
                    let y0 = b.refused as f64;
                    Rectangle::new(
                        [(xs(i), y0), ((xs(i + 1)).min(v.span), y0 + b.gave_up as f64)],
                        GAVE_UP.filled(),
                    )
                }),
        )?;
        if any_gu {
            s2.label("gave up")
                .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], GAVE_UP.filled()));
        }
        if v.bars.iter().any(|b| b.waits > 0) {
            ch.draw_series(
                v.bars
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.waits > 0)
                    .map(|(i, b)| Circle::new((xs(i) + v.step / 2.0, b.waits as f64), 4, WAITS.filled())),
            )?
            .label("retries started (waits)")
            .legend(|(x, y)| Circle::new((x + 7, y), 4, WAITS.filled()));
        }
        markers(&mut ch, c, &v, ymax)?;
        if any_ref || any_gu || v.bars.iter().any(|b| b.waits > 0) {
            legend(&mut ch)?;
        }
    }
    Ok(())
}

/// The top of a count panel's y axis: room above the highest of `counts` (at least 1) for the
/// legend.
fn headroom(counts: impl Iterator<Item = u64>) -> f64 {
    counts.max().unwrap_or(0).max(1) as f64 * 1.45
}

/// Draws the legend of a count panel in its upper right corner.
fn legend<'a, DB: DrawingBackend + 'a>(ch: &mut CountChart<'a, DB>) -> DrawResult<DB> {
    ch.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font(("sans-serif", 13))
        .draw()
}

/// Counts are whole numbers: label only the whole ticks.
fn int_label(y: &f64) -> String {
    if (y - y.round()).abs() < 1e-9 {
        format!("{}", y.round() as i64)
    } else {
        String::new()
    }
}

fn per(step: f64, unit: &str) -> String {
    let secs = match unit {
        "seconds" => step,
        "minutes" => step * 60.0,
        _ => step * 3600.0,
    };
    if secs < 120.0 {
        format!("{} s", trim(secs))
    } else if secs < 7200.0 {
        format!("{} min", trim(secs / 60.0))
    } else {
        format!("{} h", trim(secs / 3600.0))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A count panel: virtual time across, counts up.
type CountChart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn markers<DB: DrawingBackend>(
    ch: &mut CountChart<'_, DB>,
    c: &Collector,
    v: &View,
    ymax: f64,
) -> DrawResult<DB> {
    for (ts, color) in [(&c.opens, OPEN_C), (&c.closes, OK)] {
        ch.draw_series(ts.iter().map(|t| {
            let x = *t as f64 / v.unit_ns;
            PathElement::new(vec![(x, 0.0), (x, ymax)], color.mix(0.6).stroke_width(1))
        }))?;
    }
    Ok(())
}
