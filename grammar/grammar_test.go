package grammar

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustParse(t testing.TB, src string) *Grammar {
	t.Helper()
	g, err := ParseGBNF(src)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	return g
}

func TestGBNFMatches(t *testing.T) {
	for _, c := range []struct {
		src       string
		yes, nope []string
	}{
		{`root ::= "ab" | "c"`, []string{"ab", "c"}, []string{"", "a", "abc", "b"}},
		{`root ::= [a-c]+ "!"?`, []string{"a", "abc!", "cc"}, []string{"", "!", "ad", "a!!"}},
		{`root ::= [^"\\]* # comment
`, []string{"", "abc", "é漢"}, []string{`a"`, `\`}},
		{"root ::= x{2,3} y\nx ::= \"x\"\ny ::= [0-9]{2}", []string{"xx12", "xxx00"}, []string{"x12", "xxxx12", "xx1"}},
		{`root ::= ("a" | "b" c)* c ::= "c"`, []string{"", "a", "bca", "abcbc"}, []string{"b", "ac"}},
		{`root ::= "\x41\u00e9\n" [\t-\r] .`, []string{"Aé\n\tz", "Aé\n\r漢"}, []string{"Aé\n z"}},
		{"root ::= item (\",\" item){0,}\nitem ::= [0-9]+", []string{"1", "12,3,45"}, []string{"1,", ",1", ""}},
		{`root ::= "a"{3}`, []string{"aaa"}, []string{"aa", "aaaa"}},
		{"root ::= list\nlist ::= \"[\" (v (\",\" v)*)? \"]\"\nv ::= list | [0-9]", []string{"[]", "[1,[2,[]],3]"}, []string{"[", "[1,]", "[[]"}},
	} {
		g := mustParse(t, c.src)
		for _, s := range c.yes {
			if !g.Match(s) {
				t.Errorf("%q should match %q", c.src, s)
			}
		}
		for _, s := range c.nope {
			if g.Match(s) {
				t.Errorf("%q should not match %q", c.src, s)
			}
		}
	}
}

func TestGBNFErrorsSayWhere(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`root ::= "abc`, "line 1, column 14: unterminated string"},
		{"root ::= a\n", `undefined rule "a"`},
		{`x ::= "a"`, "no rule named root"},
		{"root ::= root \"a\"", "left recursion: root → root"},
		{"root ::= a\na ::= \"x\"? root", "left recursion: root → a → root"},
		{"root ::= [z-a]", "line 1, column 14: range"},
		{"root ::= \"a\"\nroot ::= \"b\"", `line 2, column 9: rule "root" defined twice`},
		{"root ::= \"a\"{1001}", "count from 0 to 1000"},
		{"root ::= (\"a\"", "missing )"},
		{"root ::= \"a\" )", "unexpected )"},
		{"root ::= \"\\q\"", `unknown escape \q`},
	} {
		_, err := ParseGBNF(c.src)
		if err == nil || !errors.Is(err, ErrGrammar) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an ErrGrammar containing %q", c.src, err, c.want)
		}
	}
}

// TestRepetitionKeepsStateBounded: a long run of a starred item returns to
// one state (its key does not grow), which is what makes masks cacheable.
func TestRepetitionKeepsStateBounded(t *testing.T) {
	g := mustParse(t, `root ::= "\"" [a-z]* "\""`)
	s := g.Start().Advance([]byte(`"ab`))
	long := s.Advance([]byte(strings.Repeat("x", 500)))
	if s.Key() != long.Key() {
		t.Fatalf("state after 500 more characters differs: %d-byte key against %d", len(long.Key()), len(s.Key()))
	}
}

// TestUTF8AcrossTokens: a code point split over two tokens matches.
func TestUTF8AcrossTokens(t *testing.T) {
	g := mustParse(t, `root ::= "é" [漢]`)
	s := g.Start().Advance([]byte{0xC3})
	if s.Dead() || s.Accepting() {
		t.Fatal("a leading byte of é should leave the state alive and not accepting")
	}
	if !s.Advance([]byte{0xA9}).Advance([]byte("漢")).Accepting() {
		t.Fatal("é split over two advances, then 漢, should match")
	}
	for _, bad := range [][]byte{{0xC3, 0x41}, {0xFF}, {0xC0, 0x80}, {0xED, 0xA0}} {
		if !g.Start().Advance(bad).Dead() {
			t.Errorf("% x should be rejected as invalid UTF-8", bad)
		}
	}
}

// TestMaskAgreesWithBruteForce compares each mask with advancing the
// state over each token's bytes, along random accepted paths through small
// grammars and a vocabulary of random byte strings (split code points
// among them).
func TestMaskAgreesWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "{", "}", "\"", ",", ":", " ", "1", "é", "漢", "\xc3", "\xa9", "\xe6"}
	var toks [][]byte
	for range 600 {
		var b []byte
		for range 1 + rng.IntN(4) {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		toks = append(toks, b)
	}
	toks = append(toks, nil) // a special token
	v := NewVocab(len(toks), func(id int32) []byte { return toks[id] })
	for _, src := range []string{
		`root ::= "{" (pair ("," pair)*)? "}"
pair ::= "\"" [a-bé]* "\"" ":" " "? [1]+`,
		`root ::= ([ab]+ " ")* "漢"`,
		`root ::= [^{}]*`,
	} {
		g := mustParse(t, src)
		mk := NewMasker(g, v)
		for range 20 {
			s, p := g.Start(), mk.Start()
			for range 12 {
				m := mk.Mask(p)
				var allowed []int32
				for id, tok := range toks {
					want := tok != nil && !s.Advance(tok).Dead()
					if m.Has(int32(id)) != want {
						t.Fatalf("%q: state %q: token %q: mask says %v, advancing says %v", src, s.Key(), tok, m.Has(int32(id)), want)
					}
					if want {
						allowed = append(allowed, int32(id))
					}
				}
				if len(allowed) == 0 {
					break
				}
				tok := toks[allowed[rng.IntN(len(allowed))]]
				s, p = s.Advance(tok), mk.Advance(p, tok)
				if p.Accepting() != s.Accepting() || p.Dead() != s.Dead() {
					t.Fatalf("%q: after %q the masker's point and the state disagree", src, tok)
				}
			}
		}
	}
}

func FuzzParseGBNF(f *testing.F) {
	for _, s := range []string{`root ::= "a" | [b-c]* x{1,3}
x ::= ("y" | .)?`, `root ::= [^\n"\\] "\u00e9"`, "root ::= a\na ::= a", `root ::= "{" "}"{2,}`} {
		f.Add(s, "a")
	}
	f.Fuzz(func(t *testing.T, src, input string) {
		if len(src) > 512 {
			return
		}
		g, err := ParseGBNF(src)
		if err != nil {
			if !errors.Is(err, ErrGrammar) {
				t.Fatalf("error not wrapping ErrGrammar: %v", err)
			}
			return
		}
		s := g.Start()
		for i := 0; i < len(input) && !s.Dead(); i++ {
			s = s.AdvanceByte(input[i])
		}
	})
}

// FuzzMaskAgreesWithStates: for any grammar and vocabulary (tokens split
// at 0xFF bytes), the mask at each point along a path equals advancing the
// state over each token, and the masker's points agree with the states.
func FuzzMaskAgreesWithStates(f *testing.F) {
	f.Add(`root ::= [^{}]* "}"`, "a\xffé\xff\xc3\xff\xa9\xff}\xff漢")
	f.Add(`root ::= ([a-bé]+ " ")* "漢"`, "ab\xff \xff\xe6\xff\xbc\xa2\xff漢")
	f.Add(`root ::= "x" [\u0100-\U0010FFFF]? [^a]`, "x\xff\xc4\xff\x80b\xffa\xff\xf0\x9f\xff\x98\x80")
	f.Fuzz(func(t *testing.T, src, vocab string) {
		if len(src) > 256 || len(vocab) > 256 {
			return
		}
		g, err := ParseGBNF(src)
		if err != nil {
			return
		}
		toks := bytes.Split([]byte(vocab), []byte{0xff})
		v := NewVocab(len(toks), func(id int32) []byte { return toks[id] })
		mk := NewMasker(g, v)
		s, p := g.Start(), mk.Start()
		for step := 0; step < 8; step++ {
			m := mk.Mask(p)
			next := -1
			for id, tok := range toks {
				want := len(tok) > 0 && !s.Advance(tok).Dead()
				if m.Has(int32(id)) != want {
					t.Fatalf("state %q: token %q: mask %v, states %v", s.Key(), tok, m.Has(int32(id)), want)
				}
				if want && next < 0 {
					next = (id + step) % len(toks)
					for len(toks[next]) == 0 || !m.Has(int32(next)) {
						next = (next + 1) % len(toks)
					}
				}
			}
			if next < 0 {
				return
			}
			s, p = s.Advance(toks[next]), mk.Advance(p, toks[next])
			if s.Accepting() != p.Accepting() || s.Dead() != p.Dead() || s.Key() != p.s.Key() {
				t.Fatalf("after %q: state %q, point %q", toks[next], s.Key(), p.s.Key())
			}
		}
	})
}
