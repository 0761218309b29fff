package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// StreamDecoder turns a stream of token ids into text deltas that never
// split a UTF-8 character: bytes of an incomplete character wait for the
// next token.
type StreamDecoder struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte
}

// NewStreamDecoder starts a stream.
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skipSpecial: skipSpecial}
}

// markers are the reasoning and tool-call tags, kept in a stream's text
// even where special tokens are skipped: the output parsers split the text
// at them (some tokenizers mark them special, Qwen3's do not).
var markers = []string{"<think>", "</think>", "<tool_call>", "</tool_call>"}

// IsMarker reports whether id is a reasoning or tool-call tag.
func (t *Tokenizer) IsMarker(id int32) bool {
	for _, a := range t.added {
		if a.ID == id {
			for _, m := range markers {
				if a.Content == m {
					return true
				}
			}
		}
	}
	return false
}

// Add appends one token and returns the text that is now complete.
func (d *StreamDecoder) Add(id int32) (string, error) {
	var err error
	skip := d.skipSpecial && !(d.t.IsSpecial(id) && d.t.IsMarker(id))
	if d.pending, err = d.t.appendToken(d.pending, id, skip); err != nil {
		return "", fmt.Errorf("tokenizer: id %d: %w", id, err)
	}
	n := completePrefix(d.pending)
	out := toValidUTF8(d.pending[:n])
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return out, nil
}

// Flush returns what is left, with an incomplete character as U+FFFD.
func (d *StreamDecoder) Flush() string {
	out := toValidUTF8(d.pending)
	d.pending = d.pending[:0]
	return out
}

// completePrefix is the length of b without a trailing incomplete (but so
// far valid) UTF-8 sequence. Invalid bytes are not held back.
func completePrefix(b []byte) int {
	for back := 1; back <= 3 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < 0x80 {
			return len(b)
		}
		if c >= 0xc0 { // a lead byte: is its sequence complete?
			need := 0
			switch {
			case c >= 0xf0:
				need = 4
			case c >= 0xe0:
				need = 3
			default:
				need = 2
			}
			if back < need && invalidPrefix(b[len(b)-back:]) == back && !utf8.FullRune(b[len(b)-back:]) {
				return len(b) - back
			}
			return len(b)
		}
	}
	return len(b)
}
