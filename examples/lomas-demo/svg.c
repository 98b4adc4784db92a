/* The SVG writer (svg.h). */
#include <stdint.h>
#include <string.h>

#include "demo.h" /* demo_utf8_decode */
#include "svg.h"

const char *svg_escape(const char *in, char *out, size_t cap)
{
	const unsigned char *u = (const unsigned char *)in;
	size_t len = strlen(in), o = 0;
	if (!cap)
		return out;
	for (size_t i = 0; i < len;) {
		uint32_t cp = 0;
		size_t n = demo_utf8_decode(u + i, len - i, &cp), k;
		const char *rep = NULL;
		bool bad = n == 0 || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') ||
		           cp == 0xfffe || cp == 0xffff;
		if (bad)
			rep = "\xef\xbf\xbd"; /* U+FFFD */
		else if (cp == '&')
			rep = "&amp;";
		else if (cp == '<')
			rep = "&lt;";
		else if (cp == '>')
			rep = "&gt;";
		else if (cp == '"')
			rep = "&quot;";
		else if (cp == '\'')
			rep = "&apos;";
		if (n == 0)
			n = 1;
		k = rep ? strlen(rep) : n;
		if (o + k >= cap)
			break;
		memcpy(out + o, rep ? rep : in + i, k);
		o += k;
		i += n;
	}
	out[o] = '\0';
	return out;
}

void svg_begin(svg *s, FILE *out, double width, double height, const char *title)
{
	char t[1024];
	s->out = out;
	s->depth = 0;
	fprintf(out,
	        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
	        "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, "
	        "sans-serif\" font-size=\"12\">\n",
	        width, height, width, height);
	fprintf(out, "<title>%s</title>\n", svg_escape(title, t, sizeof t));
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n",
	        width, height);
}

void svg_group(svg *s, const char *attrs)
{
	fprintf(s->out, "<g %s>\n", attrs ? attrs : "");
	s->depth++;
}

void svg_group_end(svg *s)
{
	if (s->depth > 0) {
		fputs("</g>\n", s->out);
		s->depth--;
	}
}

void svg_rect(svg *s, double x, double y, double w, double h, const char *style)
{
	fprintf(s->out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" %s/>\n", x, y,
	        w, h, style ? style : "");
}

void svg_line(svg *s, double x1, double y1, double x2, double y2, const char *style)
{
	fprintf(s->out, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" %s/>\n", x1, y1, x2,
	        y2, style ? style : "");
}

static void points(svg *s, const double *x, const double *y, size_t n)
{
	fputs("points=\"", s->out);
	for (size_t i = 0; i < n; i++)
		fprintf(s->out, "%s%.2f,%.2f", i ? " " : "", x[i], y[i]);
	fputs("\"", s->out);
}

void svg_polyline(svg *s, const double *x, const double *y, size_t n, const char *style,
                  const char *attrs)
{
	fputs("<polyline ", s->out);
	points(s, x, y, n);
	fprintf(s->out, " fill=\"none\" %s %s/>\n", style ? style : "", attrs ? attrs : "");
}

void svg_polygon(svg *s, const double *x, const double *y, size_t n, const char *style)
{
	fputs("<polygon ", s->out);
	points(s, x, y, n);
	fprintf(s->out, " %s/>\n", style ? style : "");
}

void svg_text(svg *s, double x, double y, const char *anchor, double rotate, const char *style,
              const char *text)
{
	char t[2048];
	fprintf(s->out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\"", x, y, anchor);
	if (rotate != 0.0)
		fprintf(s->out, " transform=\"rotate(%.1f %.2f %.2f)\"", rotate, x, y);
	fprintf(s->out, " %s>%s</text>\n", style ? style : "", svg_escape(text, t, sizeof t));
}

int svg_end(svg *s)
{
	while (s->depth > 0)
		svg_group_end(s);
	fputs("</svg>\n", s->out);
	return fflush(s->out) == 0 && !ferror(s->out) ? 0 : -1;
}
