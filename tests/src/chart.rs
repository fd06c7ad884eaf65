//! Bar charts of benchmark results, drawn with [plotters](https://docs.rs/plotters)
//! as SVG.

use std::path::Path;

use plotters::prelude::*;

/// One bar: a label, the value (microseconds) and a note printed after it
/// (e.g. `1.05x raw`).
#[derive(Debug, Clone)]
pub struct Bar {
    /// What was measured.
    pub label: String,
    /// Median microseconds.
    pub value: f64,
    /// Printed after the value.
    pub note: String,
    /// Drawn in grey: a peer's figure from another run, not this one.
    pub peer: bool,
}

/// Writes a horizontal bar chart of `bars` to `path` (SVG), titled `title`.
///
/// # Errors
///
/// The drawing backend's error text (e.g. the file cannot be written).
pub fn write_bars(path: &Path, title: &str, bars: &[Bar]) -> Result<(), String> {
    let n = bars.len().max(1);
    let height = 60 + 34 * n as u32;
    let root = SVGBackend::new(path, (860, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let max = bars.iter().map(|b| b.value).fold(0.0, f64::max).max(1e-9) * 1.35;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(330)
        .build_cartesian_2d(0.0..max, (0..n).into_segmented())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("microseconds per launch (median; lower is better)")
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => bars.get(*i).map(|b| b.label.clone()).unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(|e| e.to_string())?;
    let green = RGBColor(0x76, 0xb9, 0x00);
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let color = if b.peer {
                RGBColor(0x99, 0x99, 0x99)
            } else {
                green
            };
            Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (b.value, SegmentValue::Exact(i + 1)),
                ],
                color.filled(),
            )
        }))
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            Text::new(
                format!("{:.2} us  {}", b.value, b.note),
                (b.value + max * 0.01, SegmentValue::CenterOf(i)),
                ("sans-serif", 12),
            )
        }))
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_names_every_bar_and_value() {
        let path = std::env::temp_dir().join(format!("sdk-chart-{}.svg", std::process::id()));
        let bars = [
            Bar {
                label: "raw cuLaunchKernel".into(),
                value: 5.2,
                note: "1.000x raw".into(),
                peer: false,
            },
            Bar {
                label: "Warp wp.launch (Python)".into(),
                value: 29.5,
                note: "peer".into(),
                peer: true,
            },
        ];
        write_bars(&path, "launch cost", &bars).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).ok();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        for text in [
            "raw cuLaunchKernel",
            "Warp wp.launch (Python)",
            "5.20 us",
            "29.50 us",
            "launch cost",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
    }
}
