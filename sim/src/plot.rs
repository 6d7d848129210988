//! A hand-written SVG of one run over time: users (top panel), nodes and
//! placeholders (bottom panel).

use std::fmt::Write;

use crate::metrics::Sample;
use crate::scenario::{HOUR, Ms};

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 215.0;
const PANEL: f64 = 230.0;
const TOP: f64 = 64.0;
const GAP: f64 = 60.0;

struct Series<'a> {
    label: &'a str,
    color: &'a str,
    dashed: bool,
    value: fn(&Sample) -> u32,
}

/// The SVG document for `samples` (time counted from `start`), titled `title`
/// over a smaller `subtitle`.
pub fn svg(samples: &[Sample], start: Ms, title: &str, subtitle: &str) -> String {
    let height = TOP + 2.0 * PANEL + GAP + 50.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" font-size="16" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="42" font-size="12" text-anchor="middle">{}</text>"#,
        WIDTH / 2.0,
        escape(subtitle)
    );
    let users = [
        Series {
            label: "users (running or pulling)",
            color: "#1f77b4",
            dashed: false,
            value: |s| s.users,
        },
        Series {
            label: "users pending",
            color: "#d62728",
            dashed: false,
            value: |s| s.users_pending,
        },
    ];
    let cluster = [
        Series {
            label: "nodes",
            color: "#000000",
            dashed: false,
            value: |s| s.nodes,
        },
        Series {
            label: "nodes with the image",
            color: "#7f7f7f",
            dashed: true,
            value: |s| s.warm_nodes,
        },
        Series {
            label: "placeholders running",
            color: "#2ca02c",
            dashed: false,
            value: |s| s.placeholders,
        },
        Series {
            label: "placeholders pending",
            color: "#ff7f0e",
            dashed: false,
            value: |s| s.placeholders_pending,
        },
    ];
    panel(&mut out, samples, start, TOP, "users", &users);
    panel(
        &mut out,
        samples,
        start,
        TOP + PANEL + GAP,
        "nodes / placeholders",
        &cluster,
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">hours</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        height - 10.0
    );
    out.push_str("</svg>\n");
    out
}

fn panel(
    out: &mut String,
    samples: &[Sample],
    start: Ms,
    top: f64,
    ylabel: &str,
    series: &[Series],
) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let t0 = samples.first().map_or(start, |s| s.t);
    let t1 = samples.last().map_or(start + HOUR, |s| s.t).max(t0 + 1);
    let ymax_raw = samples
        .iter()
        .flat_map(|s| series.iter().map(move |se| (se.value)(s)))
        .max()
        .unwrap_or(1)
        .max(1);
    let step = nice_step(f64::from(ymax_raw) / 5.0);
    let ymax = (f64::from(ymax_raw) / step).ceil() * step;
    let x = |t: Ms| LEFT + plot_w * (t - t0) as f64 / (t1 - t0) as f64;
    let y = |v: f64| top + PANEL - PANEL * v / ymax;
    // axes and grid
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{PANEL}" fill="none" stroke="#333"/>"##
    );
    let mut v = 0.0;
    while v <= ymax + 1e-9 {
        let yy = y(v);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{v}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            yy + 4.0
        );
        v += step;
    }
    let hours = (t1 - t0) as f64 / HOUR as f64;
    let hstep = if hours > 12.0 {
        2.0
    } else if hours > 4.0 {
        1.0
    } else {
        0.5
    };
    let mut h = 0.0;
    while h <= hours + 1e-9 {
        let xx = LEFT + plot_w * h / hours;
        let label = (t0.saturating_sub(start)) as f64 / HOUR as f64 + h;
        let _ = writeln!(
            out,
            r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{:.1}" stroke="#eee"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            top + PANEL,
            top + PANEL + 16.0
        );
        h += hstep;
    }
    let _ = writeln!(
        out,
        r#"<text x="18" y="{:.1}" transform="rotate(-90 18 {:.1})" text-anchor="middle">{}</text>"#,
        top + PANEL / 2.0,
        top + PANEL / 2.0,
        escape(ylabel)
    );
    // lines (steps: the value holds until the next sample)
    for se in series {
        let mut pts = String::new();
        let mut prev: Option<f64> = None;
        for s in samples {
            let xx = x(s.t);
            let yy = y(f64::from((se.value)(s)));
            if let Some(py) = prev {
                let _ = write!(pts, "{xx:.1},{py:.1} ");
            }
            let _ = write!(pts, "{xx:.1},{yy:.1} ");
            prev = Some(yy);
        }
        let dash = if se.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5"{dash} points="{}"/>"#,
            se.color,
            pts.trim_end()
        );
    }
    // legend
    for (i, se) in series.iter().enumerate() {
        let ly = top + 14.0 + 20.0 * i as f64;
        let lx = LEFT + plot_w + 12.0;
        let dash = if se.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
            lx + 22.0,
            se.color,
            lx + 28.0,
            ly + 4.0,
            escape(se.label)
        );
    }
}

fn nice_step(raw: f64) -> f64 {
    if raw <= 1.0 {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_something_well_formed() {
        let samples: Vec<Sample> = (0..10)
            .map(|i| Sample {
                t: i * 60_000,
                nodes: 2 + (i as u32 % 3),
                users: 10 * i as u32,
                ..Sample::default()
            })
            .collect();
        let s = svg(&samples, 0, "a <test>", "sub");
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<polyline").count(), 6);
        assert!(s.contains("a &lt;test&gt;"));
        assert_eq!(nice_step(37.0), 50.0);
        assert_eq!(nice_step(0.3), 1.0);
    }
}
