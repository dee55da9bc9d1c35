/* json.h: a small strict JSON reader for the C tests, so they check the
 * library's JSON by structure (members, items, decoded strings) instead of
 * by substrings, and compare two documents by a canonical form (object
 * members sorted by key, strings decoded and re-escaped one way, numbers as
 * written). Not a general parser: no streaming, depth at most 64. */
#ifndef LEASES_TEST_JSON_H
#define LEASES_TEST_JSON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value {
	json_type type;
	int boolean;
	char *text;  /* STRING: the decoded bytes, NUL-terminated; NUMBER: as written */
	size_t len;  /* bytes of text */
	size_t n;    /* ARRAY, OBJECT: how many items */
	struct json_value **keys;  /* OBJECT: a STRING per member */
	struct json_value **items; /* ARRAY: the items; OBJECT: the members' values */
} json_value;

typedef struct {
	const char *p;
	int depth;
} json_cursor_;

static inline void json_free(json_value *v) {
	if (v == NULL) return;
	for (size_t i = 0; i < v->n; i++) {
		if (v->keys) json_free(v->keys[i]);
		json_free(v->items[i]);
	}
	free(v->keys);
	free(v->items);
	free(v->text);
	free(v);
}

static inline void json_ws_(json_cursor_ *c) {
	while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r') c->p++;
}

static inline json_value *json_new_(json_type t) {
	json_value *v = calloc(1, sizeof *v);
	if (v) v->type = t;
	return v;
}

static inline int json_hex4_(const char *p, unsigned *out) {
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = p[i];
		v <<= 4;
		if (ch >= '0' && ch <= '9') v |= (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f') v |= (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F') v |= (unsigned)(ch - 'A' + 10);
		else return -1;
	}
	*out = v;
	return 0;
}

static inline size_t json_utf8_(unsigned cp, char *out) {
	if (cp < 0x80) { out[0] = (char)cp; return 1; }
	if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

static inline json_value *json_string_(json_cursor_ *c) {
	if (*c->p != '"') return NULL;
	c->p++;
	size_t cap = 16, n = 0;
	char *buf = malloc(cap);
	if (buf == NULL) return NULL;
	for (;;) {
		unsigned char ch = (unsigned char)*c->p;
		if (n + 5 > cap) {
			char *bigger = realloc(buf, cap *= 2);
			if (bigger == NULL) { free(buf); return NULL; }
			buf = bigger;
		}
		if (ch == '"') { c->p++; break; }
		if (ch < 0x20) { free(buf); return NULL; } /* unescaped control character, or the end */
		if (ch != '\\') { buf[n++] = (char)ch; c->p++; continue; }
		char e = c->p[1];
		c->p += 2;
		switch (e) {
		case '"': buf[n++] = '"'; break;
		case '\\': buf[n++] = '\\'; break;
		case '/': buf[n++] = '/'; break;
		case 'b': buf[n++] = '\b'; break;
		case 'f': buf[n++] = '\f'; break;
		case 'n': buf[n++] = '\n'; break;
		case 'r': buf[n++] = '\r'; break;
		case 't': buf[n++] = '\t'; break;
		case 'u': {
			unsigned cp, lo;
			if (json_hex4_(c->p, &cp) != 0) { free(buf); return NULL; }
			c->p += 4;
			if (cp >= 0xD800 && cp < 0xDC00) {
				if (c->p[0] != '\\' || c->p[1] != 'u' || json_hex4_(c->p + 2, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF) {
					free(buf);
					return NULL;
				}
				c->p += 6;
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			} else if (cp >= 0xDC00 && cp < 0xE000) {
				free(buf);
				return NULL;
			}
			n += json_utf8_(cp, buf + n);
			break;
		}
		default: free(buf); return NULL;
		}
	}
	buf[n] = '\0';
	json_value *v = json_new_(JSON_STRING);
	if (v == NULL) { free(buf); return NULL; }
	v->text = buf;
	v->len = n;
	return v;
}

static inline json_value *json_value_(json_cursor_ *c);

/* Appends item (and key, for objects) to v; frees both on failure. */
static inline int json_push_(json_value *v, json_value *key, json_value *item) {
	json_value **items = realloc(v->items, (v->n + 1) * sizeof *items);
	if (items) v->items = items;
	json_value **keys = key ? realloc(v->keys, (v->n + 1) * sizeof *keys) : NULL;
	if (keys) v->keys = keys;
	if (items == NULL || (key && keys == NULL)) { json_free(key); json_free(item); return -1; }
	if (key) v->keys[v->n] = key;
	v->items[v->n++] = item;
	return 0;
}

static inline json_value *json_container_(json_cursor_ *c, int object) {
	if (++c->depth > 64) return NULL;
	json_value *v = json_new_(object ? JSON_OBJECT : JSON_ARRAY);
	if (v == NULL) return NULL;
	c->p++;
	json_ws_(c);
	if (*c->p == (object ? '}' : ']')) { c->p++; c->depth--; return v; }
	for (;;) {
		json_value *key = NULL;
		json_ws_(c);
		if (object) {
			key = json_string_(c);
			json_ws_(c);
			if (key == NULL || *c->p != ':') { json_free(key); json_free(v); return NULL; }
			c->p++;
		}
		json_value *item = json_value_(c);
		if (item == NULL) { json_free(key); json_free(v); return NULL; }
		if (json_push_(v, key, item) != 0) { json_free(v); return NULL; }
		json_ws_(c);
		if (*c->p == ',') { c->p++; continue; }
		if (*c->p == (object ? '}' : ']')) { c->p++; c->depth--; return v; }
		json_free(v);
		return NULL;
	}
}

static inline json_value *json_value_(json_cursor_ *c) {
	json_ws_(c);
	const char *s = c->p;
	if (*s == '{' || *s == '[') return json_container_(c, *s == '{');
	if (*s == '"') return json_string_(c);
	if (strncmp(s, "null", 4) == 0) { c->p += 4; return json_new_(JSON_NULL); }
	if (strncmp(s, "true", 4) == 0 || strncmp(s, "false", 5) == 0) {
		json_value *v = json_new_(JSON_BOOL);
		if (v) v->boolean = *s == 't';
		c->p += *s == 't' ? 4 : 5;
		return v;
	}
	/* A number: -? int frac? exp?, kept as written. */
	const char *p = s;
	if (*p == '-') p++;
	if (*p == '0') p++;
	else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
	else return NULL;
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9')) return NULL;
		while (*p >= '0' && *p <= '9') p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-') p++;
		if (!(*p >= '0' && *p <= '9')) return NULL;
		while (*p >= '0' && *p <= '9') p++;
	}
	json_value *v = json_new_(JSON_NUMBER);
	if (v == NULL) return NULL;
	v->len = (size_t)(p - s);
	v->text = malloc(v->len + 1);
	if (v->text == NULL) { free(v); return NULL; }
	memcpy(v->text, s, v->len);
	v->text[v->len] = '\0';
	c->p = p;
	return v;
}

/* Parses a whole document; NULL when text is not exactly one JSON value. */
static inline json_value *json_parse(const char *text) {
	if (text == NULL) return NULL;
	json_cursor_ c = {text, 0};
	json_value *v = json_value_(&c);
	json_ws_(&c);
	if (v != NULL && *c.p != '\0') {
		json_free(v);
		return NULL;
	}
	return v;
}

/* The member key of object o, or NULL. */
static inline json_value *json_get(const json_value *o, const char *key) {
	if (o == NULL || o->type != JSON_OBJECT) return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (o->keys[i]->len == strlen(key) && memcmp(o->keys[i]->text, key, o->keys[i]->len) == 0) return o->items[i];
	return NULL;
}

/* A string member's decoded text, or NULL (absent, null, not a string). */
static inline const char *json_get_str(const json_value *o, const char *key) {
	json_value *v = json_get(o, key);
	return v && v->type == JSON_STRING ? v->text : NULL;
}

/* A number member as an integer; fallback when absent or not a number. */
static inline int64_t json_get_int(const json_value *o, const char *key, int64_t fallback) {
	json_value *v = json_get(o, key);
	return v && v->type == JSON_NUMBER ? strtoll(v->text, NULL, 10) : fallback;
}

/* ---- the canonical form ---- */

typedef struct {
	char *s;
	size_t n, cap;
	int failed;
} json_buf_;

static inline void json_put_(json_buf_ *b, const char *s, size_t n) {
	if (b->failed) return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (b->n + n + 1 > cap) cap *= 2;
		char *bigger = realloc(b->s, cap);
		if (bigger == NULL) { b->failed = 1; return; }
		b->s = bigger;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
}

static inline void json_put_string_(json_buf_ *b, const json_value *v) {
	json_put_(b, "\"", 1);
	for (size_t i = 0; i < v->len; i++) {
		unsigned char ch = (unsigned char)v->text[i];
		char esc[8];
		if (ch == '"' || ch == '\\') {
			esc[0] = '\\';
			esc[1] = (char)ch;
			json_put_(b, esc, 2);
		} else if (ch < 0x20) {
			snprintf(esc, sizeof esc, "\\u%04x", ch);
			json_put_(b, esc, 6);
		} else {
			json_put_(b, (const char *)&v->text[i], 1);
		}
	}
	json_put_(b, "\"", 1);
}

static inline int json_key_cmp_(const json_value *x, const json_value *y) {
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->text, y->text, n);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

static inline void json_put_value_(json_buf_ *b, const json_value *v) {
	switch (v->type) {
	case JSON_NULL: json_put_(b, "null", 4); return;
	case JSON_BOOL: json_put_(b, v->boolean ? "true" : "false", v->boolean ? 4 : 5); return;
	case JSON_NUMBER: json_put_(b, v->text, v->len); return;
	case JSON_STRING: json_put_string_(b, v); return;
	case JSON_ARRAY:
		json_put_(b, "[", 1);
		for (size_t i = 0; i < v->n; i++) {
			if (i) json_put_(b, ",", 1);
			json_put_value_(b, v->items[i]);
		}
		json_put_(b, "]", 1);
		return;
	case JSON_OBJECT: {
		/* Members in byte order of their keys (a selection sort of indexes:
		 * test documents are small). */
		size_t *order = malloc((v->n ? v->n : 1) * sizeof *order);
		if (order == NULL) { b->failed = 1; return; }
		for (size_t i = 0; i < v->n; i++) order[i] = i;
		for (size_t i = 0; i < v->n; i++)
			for (size_t j = i + 1; j < v->n; j++)
				if (json_key_cmp_(v->keys[order[j]], v->keys[order[i]]) < 0) {
					size_t t = order[i];
					order[i] = order[j];
					order[j] = t;
				}
		json_put_(b, "{", 1);
		for (size_t i = 0; i < v->n; i++) {
			if (i) json_put_(b, ",", 1);
			json_put_string_(b, v->keys[order[i]]);
			json_put_(b, ":", 1);
			json_put_value_(b, v->items[order[i]]);
		}
		json_put_(b, "}", 1);
		free(order);
		return;
	}
	}
}

/* The canonical text of v (malloc'd; free it), or NULL. Two documents with
 * the same canonical text hold the same data. */
static inline char *json_canon(const json_value *v) {
	if (v == NULL) return NULL;
	json_buf_ b = {0};
	json_put_value_(&b, v);
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

#endif
