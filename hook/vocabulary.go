package hook

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
)

// vocabularyJSON is the secret vocabulary: phrases by category and language, the words
// that count only in a field's name or title, and the phrases that are no secret
// (vocabulary.json says how each is matched).
//
//go:embed vocabulary.json
var vocabularyJSON []byte

// vocabularyFile is vocabulary.json.
type vocabularyFile struct {
	Version    int                            `json:"version"`
	Categories map[string]map[string][]string `json:"categories"`
	FieldWords map[string]map[string][]string `json:"field_words"`
	NotSecret  map[string][]string            `json:"not_secret"`
}

// A phrase of the vocabulary, folded for matching.
type phrase struct {
	text  string
	words []string // folded (foldedWords)
	// inWord phrases match inside words: a script written without spaces between words,
	// or with particles attached to them (Han, kana, Hangul).
	inWord bool
	// fieldOnly phrases count only in a field's own name or title.
	fieldOnly bool
}

// A vocabulary finds secret phrases in text.
type vocabulary struct {
	phrases   []phrase // longest first, so that a match names the most specific phrase
	notSecret [][]string
}

// defaultVocabulary is vocabulary.json's, folded on first use: the server and a hook's
// URL-mode decision never need it.
var defaultVocabulary = sync.OnceValue(func() *vocabulary { return mustVocabulary(vocabularyJSON) })

func mustVocabulary(data []byte) *vocabulary {
	v, err := parseVocabulary(data)
	if err != nil {
		panic(fmt.Sprintf("hook: vocabulary.json: %v", err))
	}
	return v
}

// parseVocabulary reads a vocabulary file and folds its phrases.
func parseVocabulary(data []byte) (*vocabulary, error) {
	var f vocabularyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("version %d, want 1", f.Version)
	}
	v := &vocabulary{}
	add := func(groups map[string]map[string][]string, fieldOnly bool) error {
		for category, langs := range groups {
			for lang, texts := range langs {
				for _, text := range texts {
					ws := foldedWords(text)
					if len(ws) == 0 {
						return fmt.Errorf("%s/%s: %q has no word", category, lang, text)
					}
					v.phrases = append(v.phrases, newPhrase(text, ws, fieldOnly))
				}
			}
		}
		return nil
	}
	if err := add(f.Categories, false); err != nil {
		return nil, err
	}
	if err := add(f.FieldWords, true); err != nil {
		return nil, err
	}
	for _, texts := range f.NotSecret {
		for _, text := range texts {
			v.notSecret = append(v.notSecret, foldedWords(text))
		}
	}
	sortPhrases(v.phrases)
	return v, nil
}

// newPhrase is the phrase text, of the folded words ws.
func newPhrase(text string, ws []string, fieldOnly bool) phrase {
	return phrase{text: text, words: ws, inWord: strings.IndexFunc(text, unspaced) >= 0, fieldOnly: fieldOnly}
}

// ownVocabulary folds a policy's own secret phrases and phrases that are no secret.
func ownVocabulary(secret, notSecret []string) (*vocabulary, error) {
	own := &vocabulary{}
	for _, text := range secret {
		ws := foldedWords(text)
		if len(ws) == 0 {
			return nil, fmt.Errorf("secret word %q has no word", text)
		}
		own.phrases = append(own.phrases, newPhrase(text, ws, false))
	}
	for _, text := range notSecret {
		ws := foldedWords(text)
		if len(ws) == 0 {
			return nil, fmt.Errorf("innocent phrase %q has no word", text)
		}
		own.notSecret = append(own.notSecret, ws)
	}
	return own, nil
}

// with returns v and own together; v itself is not changed.
func (v *vocabulary) with(own *vocabulary) *vocabulary {
	if len(own.phrases) == 0 && len(own.notSecret) == 0 {
		return v
	}
	out := &vocabulary{phrases: append(slices.Clip(v.phrases), own.phrases...), notSecret: append(slices.Clip(v.notSecret), own.notSecret...)}
	sortPhrases(out.phrases)
	return out
}

// sortPhrases puts the longest phrases first, so that a match names the most specific.
func sortPhrases(phrases []phrase) {
	sort.SliceStable(phrases, func(i, j int) bool {
		a, b := phrases[i], phrases[j]
		if len(a.words) != len(b.words) {
			return len(a.words) > len(b.words)
		}
		return a.text < b.text
	})
}

// unspaced reports whether r is of a script whose words are not set apart by spaces (Han,
// Hiragana, Katakana), or whose words take particles (Hangul).
func unspaced(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// find returns the first secret phrase in text (at the earliest word, the longest there);
// field says whether text is a field's own name or title, where
// fieldOnly words count too. ok is false when text holds none.
func (v *vocabulary) find(text string, field bool) (found phrase, ok bool) {
	ws := foldedWords(text)
	excluded := make([]bool, len(ws))
	for i := range ws {
		for _, p := range v.notSecret {
			if hasAt(ws, i, p) {
				for j := range p {
					excluded[i+j] = true
				}
			}
		}
	}
	for i := range ws {
		for _, p := range v.phrases {
			if p.inWord || (p.fieldOnly && !field) || !hasAt(ws, i, p.words) {
				continue
			}
			clear := true
			for j := range p.words {
				clear = clear && !excluded[i+j]
			}
			if clear {
				return p, true
			}
		}
	}
	joined := " " + strings.Join(ws, " ") + " "
	for _, p := range v.phrases {
		if p.inWord && (!p.fieldOnly || field) && strings.Contains(joined, strings.Join(p.words, " ")) {
			return p, true
		}
	}
	return phrase{}, false
}
