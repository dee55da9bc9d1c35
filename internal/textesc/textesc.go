// Package textesc writes free text for people so that nothing in it can
// steer a terminal or a page, or hide: the one rule the CLI's text output
// and the status page share. Control characters, invisible format
// characters (U+202E RIGHT-TO-LEFT OVERRIDE, U+200B ZERO WIDTH SPACE, …),
// line and paragraph separators and spaces other than U+0020 are written
// as \uXXXX, and a backslash as \\, so the shown form decodes to exactly
// one text. Names have their own, stricter form (core.DisplayName).
package textesc

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
)

// NeedsEscape reports whether r is shown as \uXXXX: a control or format
// character, a line or paragraph separator, or a space other than U+0020.
func NeedsEscape(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) || (unicode.Is(unicode.Zs, r) && r != ' ')
}

// Text is s with every character NeedsEscape names written as \uXXXX
// (\UXXXXXXXX beyond the BMP) and every backslash as \\.
func Text(s string) string { return text(s, false) }

// Lines is Text for text shown on several lines (a payload's preview): a
// line feed and a tab stay as they are; everything else as Text.
func Lines(s string) string { return text(s, true) }

func text(s string, lines bool) string {
	keep := func(r rune) bool { return lines && (r == '\n' || r == '\t') }
	if !strings.ContainsFunc(s, func(r rune) bool { return NeedsEscape(r) && !keep(r) }) && !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case keep(r) || !NeedsEscape(r):
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

// JSON is a JSON value (a fact's, as published) for people: the same JSON
// with every character NeedsEscape names, which JSON allows unescaped in
// strings beyond the ASCII controls, written as JSON's own \uXXXX escapes
// (a pair beyond the BMP), so it stays the same JSON value and shows every
// character.
func JSON(raw []byte) string {
	s := string(raw)
	if !strings.ContainsFunc(s, NeedsEscape) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !NeedsEscape(r) {
			b.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&b, `\u%04x`, u)
		}
	}
	return b.String()
}
