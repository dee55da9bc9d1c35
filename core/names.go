// The rule for names a caller creates (production names, job keys, worker
// names, fact keys): one spelling per name, nothing invisible (docs/decisions.md, "Names").
package core

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// checkName checks a name that a call is about to create or record: the
// text rules of checkText, and the name rule. Two strings that render alike
// must not become two names without the caller seeing it, so a new name must
// be NFC (else "café" typed on two systems can be two productions), must
// hold no character that renders as nothing or as a plain space (control,
// format, private-use, unassigned, separators other than U+0020, variation
// selectors and other default-ignorable code points), and must not begin or
// end with white space. Names only looked up (the production a claim names,
// a key filter) are compared byte for byte with checkText alone, so a name
// stored before this rule stays reachable.
func checkName(what, s string, max int, allowEmpty bool) error {
	if err := checkText(what, s, max, allowEmpty); err != nil {
		return err
	}
	pos := 0
	for i, r := range s {
		pos++
		if why := invisible(r); why != "" {
			return errf(KindInvalidArgument, "%s contains %s (%s) at character %d (byte %d); names may hold no invisible or look-alike space character",
				what, codePoint(r), why, pos, i)
		}
		if unicode.IsSpace(r) && (i == 0 || i+utf8.RuneLen(r) == len(s)) {
			end := "ends"
			if i == 0 {
				end = "begins"
			}
			return errf(KindInvalidArgument, "%s %s with white space (%s at character %d); names may not begin or end with white space",
				what, end, codePoint(r), pos)
		}
	}
	if !norm.NFC.IsNormalString(s) {
		// QuickSpan stops at the first segment that may change under NFC:
		// the caller learns where, and the spelling to use instead.
		at := norm.NFC.QuickSpanString(s)
		return errf(KindInvalidArgument, "%s is not in Unicode normalization form NFC (from character %d, byte %d); write it as %+q",
			what, utf8.RuneCountInString(s[:at])+1, at, norm.NFC.String(s))
	}
	return nil
}

// invisibleClasses are the characters a name may not hold, and why.
var invisibleClasses = []struct {
	table *unicode.RangeTable
	why   string
}{
	{unicode.Cc, "a control character"},
	{unicode.Cf, "an invisible format character"},
	{unicode.Zs, "a space other than U+0020"},
	{unicode.Zl, "a line separator"},
	{unicode.Zp, "a paragraph separator"},
	{unicode.Co, "a private-use character"},
	{unicode.Variation_Selector, "a variation selector"},
	{unicode.Other_Default_Ignorable_Code_Point, "a default-ignorable character"},
}

// invisible says why r may not appear in a name, or "" when it may.
func invisible(r rune) string {
	if r == ' ' {
		return ""
	}
	for _, c := range invisibleClasses {
		if unicode.Is(c.table, r) {
			return c.why
		}
	}
	if !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S) {
		return "an unassigned code point"
	}
	return ""
}

// codePoint names r as U+XXXX, never as itself: the character may be
// invisible, so printing it would not show the caller what is wrong.
func codePoint(r rune) string { return fmt.Sprintf("U+%04X", r) }

// DisplayName is name as a listing prints it for people (the CLI's text
// output): as itself when nothing in it can be mistaken for something else,
// otherwise with every character outside printable ASCII written as \uXXXX
// (\UXXXXXXXX beyond the BMP), and white space at either end written so too.
// A backslash is always doubled, so the printed form decodes to exactly one
// name: two different names never print alike, even those stored before
// the name rule. A name prints as itself when it is NFC, has no white space
// at either end, and each character outside ASCII is a letter, mark or
// number that has no compatibility form (full-width letters do), in one
// script (Han, Hiragana, Katakana, Hangul and Bopomofo count as one) and,
// outside Latin, with no ASCII letter beside it and not all drawn from the
// letters that look like ASCII ones (so the Cyrillic "раура" is escaped, "бага" is not).
// Look-alikes within one script (Latin "ɑ" and "a") remain.
func DisplayName(name string) string {
	if plainName(name) {
		return strings.ReplaceAll(name, `\`, `\\`)
	}
	var b strings.Builder
	last := len(name) - 1
	for i, r := range name {
		edge := unicode.IsSpace(r) && (i == 0 || i+utf8.RuneLen(r)-1 == last)
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r >= 0x20 && r < 0x7f && !edge:
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

// asciiLookalikes are letters of other scripts that render like an ASCII
// letter in common fonts (after Unicode's confusables data, UTS #39).
const asciiLookalikes = "аеорсухіјѕԁԛԝһӏԍґАВЕКМНОРСТУХІЈЅԚԜҮѴѵ" + // Cyrillic
	"αονικρυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ" + // Greek
	"օոսցհզ" + // Armenian
	"ᎪᏴᏟᎠᎬᏀᎻᏆᎫᏦᏞᎷᏢᏚᎢᏙᏔᏃ" // Cherokee

func plainName(name string) bool {
	if name == "" {
		return true
	}
	first, _ := utf8.DecodeRuneInString(name)
	lastR, _ := utf8.DecodeLastRuneInString(name)
	if unicode.IsSpace(first) || unicode.IsSpace(lastR) || !norm.NFC.IsNormalString(name) {
		return false
	}
	var script string // of the letters outside ASCII
	asciiLetters, allLookalike := false, true
	for _, r := range name {
		if r < utf8.RuneSelf {
			if r < 0x20 || r == 0x7f {
				return false
			}
			asciiLetters = asciiLetters || unicode.IsLetter(r)
			continue
		}
		if !unicode.In(r, unicode.L, unicode.M, unicode.N) || invisible(r) != "" || norm.NFKC.String(string(r)) != string(r) {
			return false
		}
		s := scriptOf(r)
		switch {
		case s == "Inherited": // a combining mark belongs to its letter
			continue
		case s == "Common":
			return false
		case script == "":
			script = s
		case script != s:
			return false
		}
		if unicode.IsLetter(r) && !strings.ContainsRune(asciiLookalikes, r) {
			allLookalike = false
		}
	}
	if script == "" || script == "Latin" {
		return true
	}
	return !asciiLetters && !allLookalike
}

// scriptOf is r's Unicode script, the East Asian ones as one ("Han").
func scriptOf(r rune) string {
	for _, s := range []string{"Han", "Hiragana", "Katakana", "Hangul", "Bopomofo"} {
		if unicode.Is(unicode.Scripts[s], r) {
			return "Han"
		}
	}
	for name, t := range unicode.Scripts {
		if unicode.Is(t, r) {
			return name
		}
	}
	return "Unknown"
}
