/*
 * A small SVG writer for lomas-demo plot: just what a chart needs (lines,
 * polylines, polygons, rectangles, text, groups), with every piece of text
 * and every attribute value escaped for XML. Coordinates are user units
 * (pixels), printed with two decimals.
 */
#ifndef LOMAS_DEMO_SVG_H
#define LOMAS_DEMO_SVG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct svg {
	FILE *out;
	int depth; /* open groups */
} svg;

/*
 * Text as XML character data or an attribute value into out (cap bytes,
 * always terminated): & < > " ' as entities; bytes that are not UTF-8 and
 * characters XML 1.0 forbids (C0 controls but tab, newline and CR; U+FFFE,
 * U+FFFF) as U+FFFD. Returns out.
 */
const char *svg_escape(const char *in, char *out, size_t cap);

/* Start a document of width x height on out: the XML declaration and <svg>. */
void svg_begin(svg *s, FILE *out, double width, double height, const char *title);
/* <g> with raw attributes (already safe: built by the caller from numbers and
 * svg_escape'd text), and its end. */
void svg_group(svg *s, const char *attrs);
void svg_group_end(svg *s);
void svg_rect(svg *s, double x, double y, double w, double h, const char *style);
void svg_line(svg *s, double x1, double y1, double x2, double y2, const char *style);
/* An open polyline (or a closed polygon) through n points; attrs may be NULL. */
void svg_polyline(svg *s, const double *x, const double *y, size_t n, const char *style,
                  const char *attrs);
void svg_polygon(svg *s, const double *x, const double *y, size_t n, const char *style);
/* Text at (x, y); anchor "start", "middle" or "end"; rotate: degrees (0: none). */
void svg_text(svg *s, double x, double y, const char *anchor, double rotate, const char *style,
              const char *text);
/* Close the document; 0, or -1 when the stream had an error. */
int svg_end(svg *s);

#endif
