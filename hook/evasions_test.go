package hook

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The evasions a hostile or careless server could try against the form check, by class;
// each case got past the check before normalisation, the vocabulary file and reading the
// whole form (issue 31), and each must now be refused.
func TestFormEvasionsAreCaught(t *testing.T) {
	j := testJudge(t)
	str := func(name, title string) string {
		return `{"type":"object","properties":{"` + name + `":{"type":"string","title":"` + title + `"}}}`
	}
	for class, cases := range map[string][]struct{ name, message, schema string }{
		"words it did not know": {
			{"pw", "Sign in", str("pw", "")},
			{"pwd", "Sign in", str("pwd", "")},
			{"PIN", "Unlock", str("PIN", "")},
			{"2fa", "Verify", str("code", "2FA code")},
			{"auth", "Connect", str("auth", "")},
			{"bearer", "Connect", str("header", "Bearer")},
			{"sessionid", "Connect", str("sessionid", "")},
			{"cookie", "Connect", str("cookie", "")},
			{"GitHub PAT", "Connect", str("v", "GitHub PAT")},
			{"one of your API tokens", "Paste one of your API tokens", str("value", "")},
			{"Authorization header", "Connect", str("h", "Authorization header")},
			{"wallet mnemonic", "Restore", str("m", "Wallet mnemonic")},
			{"contraseña", "Entrar", str("c", "Contraseña")},
			{"Passwort", "Anmelden", str("p", "Passwort")},
			{"mot de passe", "Connexion", str("m", "Mot de passe")},
			{"пароль", "Вход", str("p", "Пароль")},
			{"密码", "登录", str("p", "请输入密码")},
			{"パスワード", "ログイン", str("p", "パスワードを入力")},
			{"비밀번호", "로그인", str("p", "비밀번호를 입력하세요")},
		},
		"unicode": {
			{"zero-width space", "Sign in", str("x", "pass\u200bword")},
			{"soft hyphen", "Sign in", str("x", "pass\u00adword")},
			{"Cyrillic а", "Sign in", str("x", "p\u0430ssword")},
			{"full-width", "Sign in", str("x", "ｐａｓｓｗｏｒｄ")},
			{"Passw0rd", "Sign in", str("x", "Passw0rd")},
			{"p@ssword", "Sign in", str("x", "p@ssword")},
			{"spaced letters", "Sign in", str("x", "p a s s w o r d")},
			{"A-P-I key", "Connect", str("x", "A-P-I key")},
			{"bidi control", "Sign in", str("x", "pass\u202eword")},
		},
		"where it looks": {
			{"the schema's title", "Continue", `{"type":"object","title":"Your API key","properties":{"value":{"type":"string"}}}`},
			{"the schema's description", "Continue", `{"type":"object","description":"Paste your token","properties":{"value":{"type":"string"}}}`},
			{"an enum option's title", "Continue", `{"type":"object","properties":{"kind":{"type":"string","oneOf":[{"const":"a","title":"I will paste my API key next"}]},"value":{"type":"string"}}}`},
			{"a boolean's title", "Continue", `{"type":"object","properties":{"ok":{"type":"boolean","title":"Type your password in the next field"},"value":{"type":"string"}}}`},
			{"the message alone", "Paste your Acme API key below", str("value", "")},
			{"anyOf with a string", "Continue", `{"type":"object","properties":{"api_key":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`},
			{"a nested object", "Continue", `{"type":"object","properties":{"creds":{"type":"object","properties":{"secret":{"type":"string"}}}}}`},
			{"array items", "Continue", `{"type":"object","properties":{"keys":{"type":"array","items":{"type":"string","title":"API key"}}}}`},
			{"object items", "Continue", `{"type":"object","properties":{"accounts":{"type":"array","items":{"type":"object","properties":{"token":{"type":"string"}}}}}}`},
			{"a default", "Continue", `{"type":"object","properties":{"v":{"type":"string","default":"paste your api key here"}}}`},
			{"an example", "Continue", `{"type":"object","properties":{"v":{"type":"string","examples":["your password"]}}}`},
			{"a type list", "Continue", `{"type":"object","properties":{"password":{"type":["string","null"]}}}`},
		},
	} {
		for _, c := range cases {
			t.Run(class+"/"+c.name, func(t *testing.T) {
				if e := j.Decide(formInput("evil", c.message, c.schema)); e.Decision != Refuse {
					t.Fatalf("not refused: %s (%s)", e.Decision, e.Reason)
				}
			})
		}
	}
}

// Forms that ask for no secret keep working, whatever words they hold around what cannot
// carry one.
func TestInnocentFormsPass(t *testing.T) {
	j := testJudge(t)
	for name, c := range map[string]struct{ message, schema string }{
		"a project":                    {"Which project?", `{"type":"object","properties":{"project":{"type":"string","title":"Project"}}}`},
		"a boolean about a password":   {"Reset your password?", `{"type":"object","properties":{"ok":{"type":"boolean"}}}`},
		"a choice of token types":      {"Which?", `{"type":"object","properties":{"token_type":{"type":"string","enum":["bearer","basic"]}}}`},
		"max_tokens":                   {"How long?", `{"type":"object","properties":{"max_tokens":{"type":"integer"}}}`},
		"page_token":                   {"Next page?", `{"type":"object","properties":{"page_token":{"type":"string"}}}`},
		"a forgotten password's email": {"Forgot password? We send a link.", `{"type":"object","properties":{"email":{"type":"string","format":"email"}}}`},
		"keywords in Spanish":          {"Buscar", `{"type":"object","properties":{"q":{"type":"string","title":"Palabra clave"}}}`},
		"a boarding pass":              {"Your trip", `{"type":"object","properties":{"seat":{"type":"string","title":"Seat on your boarding pass"}}}`},
		"a secretary":                  {"Who?", `{"type":"object","properties":{"secretary_name":{"type":"string"}}}`},
		"cookies consent and a name":   {"Welcome", `{"type":"object","properties":{"cookie":{"type":"boolean","title":"Accept cookies"},"name":{"type":"string"}}}`},
		"a pin choice and a comment":   {"Dashboard", `{"type":"object","properties":{"pin":{"type":"boolean","title":"Pin to the dashboard"},"comment":{"type":"string"}}}`},
		"a zip code":                   {"Shipping", `{"type":"object","properties":{"zip":{"type":"string","title":"Zip code"}}}`},
		"a promo code":                 {"Checkout", `{"type":"object","properties":{"promo":{"type":"string","title":"Promo code"}}}`},
		"a secret santa":               {"Party", `{"type":"object","properties":{"gift":{"type":"string","title":"Gift idea for secret santa"}}}`},
		"oauth2 in a name":             {"Setup", `{"type":"object","properties":{"oauth2_provider":{"type":"string","enum":["github","google"]},"team":{"type":"string"}}}`},
		"a version number":             {"Deploy", `{"type":"object","properties":{"v":{"type":"string","title":"Version","examples":["v1.2.3"]}}}`},
		"a sha256 sum":                 {"Verify", `{"type":"object","properties":{"sha256":{"type":"string","title":"Checksum of the download"}}}`},
		"Japanese address":             {"住所", `{"type":"object","properties":{"addr":{"type":"string","title":"住所を入力してください"}}}`},
	} {
		t.Run(name, func(t *testing.T) {
			if e := j.Decide(formInput("tickets", c.message, c.schema)); e.Decision != Allow {
				t.Fatalf("refused: %s", e.Reason)
			}
		})
	}
}

// Every phrase of the vocabulary is caught as a free-text field's title, and every field
// word as a field's name; none is lost to its own normalisation.
func TestEveryVocabularyPhraseIsCaught(t *testing.T) {
	var f vocabularyFile
	if err := json.Unmarshal(vocabularyJSON, &f); err != nil {
		t.Fatal(err)
	}
	langs := map[string]bool{}
	j := testJudge(t)
	schema := func(name, title string) string {
		b, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{name: map[string]any{"type": "string", "title": title}}})
		return string(b)
	}
	for category, byLang := range f.Categories {
		for lang, texts := range byLang {
			langs[lang] = true
			for _, text := range texts {
				if e := j.Decide(formInput("evil", "Continue", schema("value", text))); e.Decision != Refuse {
					t.Errorf("%s/%s %q as a title: %s (%s)", category, lang, text, e.Decision, e.Reason)
				}
			}
		}
	}
	for category, byLang := range f.FieldWords {
		for lang, texts := range byLang {
			for _, text := range texts {
				if e := j.Decide(formInput("evil", "Continue", schema(text, ""))); e.Decision != Refuse {
					t.Errorf("field word %s/%s %q as a name: %s (%s)", category, lang, text, e.Decision, e.Reason)
				}
			}
		}
	}
	for _, want := range strings.Fields("en es pt fr de it nl pl tr ru uk zh ja ko") {
		if !langs[want] {
			t.Errorf("the vocabulary has no %s", want)
		}
	}
	for _, category := range strings.Fields("password api_key session one_time_code recovery_phrase private_key payment_card") {
		if len(f.Categories[category]) == 0 {
			t.Errorf("the vocabulary has no category %s", category)
		}
	}
}

// FuzzSecretWordsSurviveNormalisation mutates a secret word of the vocabulary with the
// classes of disguise a person would still read through (invisible characters, look-alike
// letters, full-width forms, leet digits, spelled-out letters, case) and checks that the
// word is still found.
func FuzzSecretWordsSurviveNormalisation(f *testing.F) {
	for _, seed := range []struct {
		word uint8
		ops  string
	}{{0, ""}, {1, "z"}, {2, "cfl"}, {3, "wsu"}, {4, "zcwl"}} {
		f.Add(seed.word, seed.ops)
	}
	words := []string{"password", "passphrase", "credentials", "secret", "passcode", "mnemonic", "token", "private key", "card number", "api key"}
	f.Fuzz(func(t *testing.T, pick uint8, ops string) {
		word := words[int(pick)%len(words)]
		disguised := disguise(word, ops)
		if _, ok := defaultVocabulary().find(disguised, true); !ok {
			t.Fatalf("%q disguised by %q as %q is not found", word, ops, disguised)
		}
	})
}

// disguise applies ops to word, one letter each: z a zero-width space inside, c a Cyrillic
// look-alike, w full-width letters, l leet digits, s letters spelled out with spaces, u
// upper case, h a soft hyphen.
func disguise(word string, ops string) string {
	cyrillic := map[rune]rune{'a': 'а', 'e': 'е', 'o': 'о', 'p': 'р', 'c': 'с', 'x': 'х'}
	leetOf := map[rune]rune{'o': '0', 'e': '3', 'a': '4', 's': '5', 't': '7'}
	for _, op := range ops {
		rs := []rune(word)
		switch op {
		case 'z', 'h':
			mark := "\u200b"
			if op == 'h' {
				mark = "\u00ad"
			}
			if len(rs) > 2 {
				word = string(rs[:2]) + mark + string(rs[2:])
			}
		case 'c':
			word = strings.Map(func(r rune) rune {
				if c, ok := cyrillic[r]; ok {
					return c
				}
				return r
			}, word)
		case 'w':
			word = strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' {
					return r - 'a' + 'ａ'
				}
				return r
			}, word)
		case 'l':
			// Leet inside the first word only, never its first letter: a word's own digits
			// at its start or end stay digits (2fa, cvv2).
			first := strings.Fields(word)[0]
			frs := []rune(first)
			for i := 1; i < len(frs)-1; i++ {
				if d, ok := leetOf[frs[i]]; ok {
					frs[i] = d
					break
				}
			}
			word = string(frs) + strings.TrimPrefix(word, first)
		case 's':
			if !strings.Contains(word, " ") {
				word = strings.Join(strings.Split(word, ""), " ")
			}
		case 'u':
			word = strings.ToUpper(word)
		}
	}
	return word
}

// Answers that carry a key in a shape the check did not read: inside an object or a list
// of lists, spaced in groups, or split over two fields. Each got past before; each is now
// declined. Innocent answers of the same shapes go through.
func TestAnswerEvasionsAreCaught(t *testing.T) {
	j := testJudge(t)
	const key = "ghp_0123456789abcdefghijABCDEFGHIJ0123"
	for name, content := range map[string]string{
		"an object answer":          `{"account":{"login":"alice","token":"` + key + `"}}`,
		"a list of lists":           `{"v":[["fine"],["` + key + `"]]}`,
		"spaced every four":         `{"v":"Zx8q L2mN 7vB4 kR9t W1yH 6pD3 sF5g J0aC"}`,
		"hyphenated every four":     `{"v":"Zx8q-L2mN-7vB4-kR9t-W1yH-6pD3-sF5g-J0aC"}`,
		"a prefixed key in groups":  `{"v":"ghp_ 0123 4567 89ab cdef ghij ABCD EFGH IJ01 23"}`,
		"split over two fields":     `{"part1":"ghp_0123456789abcdef","part2":"ghijABCDEFGHIJ0123"}`,
		"split, in the other order": `{"a":"ghijABCDEFGHIJ0123","b":"ghp_0123456789abcdef"}`,
		"split over three fields":   `{"a":"Zx8qL2mN7v","b":"B4kR9tW1yH","c":"6pD3sF5gJ0aC"}`,
		"a key without its prefix":  `{"v":"0123456789abcdefghijABCDEFGHIJ0123"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if e := j.Decide(answer("evil", "accept", content)); e.Decision != Decline {
				t.Fatalf("not declined: %s (%s)", e.Decision, e.Reason)
			}
		})
	}
	for name, content := range map[string]string{
		"a name":                     `{"first":"Alice","last":"Smith"}`,
		"an order and an email":      `{"order":"ORDER-2026-11-30-000123","email":"alice.smith@example.com"}`,
		"a date and a time":          `{"date":"2026-11-30","time":"14:30"}`,
		"a phone number":             `{"phone":"+1 415 555 0100"}`,
		"an address":                 `{"street":"221B Baker Street","city":"London","zip":"NW1 6XE"}`,
		"a UUID and a count":         `{"id":"550e8400-e29b-41d4-a716-446655440000","n":3}`,
		"an object of plain answers": `{"prefs":{"theme":"dark","lang":"fr"},"tags":["a","b"]}`,
		"a sentence":                 `{"note":"Please call me back after 5 pm on Tuesday, thanks"}`,
	} {
		t.Run("innocent/"+name, func(t *testing.T) {
			if e := j.Decide(answer("tickets", "accept", content)); e.Decision != Allow {
				t.Fatalf("declined: %s", e.Reason)
			}
		})
	}
}

// A stance per server: strict refuses free text the hook cannot tell is innocent,
// answers-only lets forms through (its answers still judged) only where every definition
// has its URL, and standard is the default; a bad stance is named.
func TestServerStances(t *testing.T) {
	j, err := NewJudge(Policy{
		Stance: StanceStandard,
		Servers: []ServerStance{
			{Name: "careful", Stance: StanceStrict},
			{Name: "wiki", URL: "https://wiki.example.com/mcp", Stance: StanceAnswersOnly},
			{Name: "moved", URL: "https://moved.example.com/mcp", Stance: StanceAnswersOnly},
		},
	}, Options{Servers: fakeServers{
		"wiki":  {{Source: "~/.claude.json", URL: "https://wiki.example.com/mcp"}},
		"moved": {{Source: "/work/.mcp.json", URL: "https://evil.test/mcp"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	note := `{"type":"object","properties":{"note":{"type":"string"}}}`
	email := `{"type":"object","properties":{"email":{"type":"string","format":"email"},"stars":{"type":"integer","minimum":1,"maximum":5},"ok":{"type":"boolean"}}}`
	bigNumber := `{"type":"object","properties":{"n":{"type":"number"}}}`
	key := `{"type":"object","properties":{"api_key":{"type":"string"}}}`
	for _, tt := range []struct {
		name, server, schema string
		want                 Decision
		reason               string
	}{
		{"strict: a free note", "careful", note, Refuse, `strict: field "note" takes free text`},
		{"strict: an email, a rating and a yes/no", "careful", email, Allow, "innocent kinds"},
		{"strict: a number without a range", "careful", bigNumber, Refuse, `field "n"`},
		{"strict: a key is named as a key", "careful", key, Refuse, `asks for a secret ("api key")`},
		{"standard: a free note", "other", note, Allow, "asks for no secret"},
		{"answers-only: a key form goes through", "wiki", key, Allow, "answers-only"},
		{"answers-only at another URL is standard", "moved", key, Refuse, "answers-only by name, but /work/.mcp.json defines it with another URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := j.Decide(formInput(tt.server, "Continue", tt.schema))
			if e.Decision != tt.want || !strings.Contains(e.Reason, tt.reason) {
				t.Fatalf("%s (%s), want %s (%s)", e.Decision, e.Reason, tt.want, tt.reason)
			}
		})
	}
	// Answers of an answers-only server are judged.
	if e := j.Decide(answer("wiki", "accept", `{"v":"ghp_0123456789abcdefghijABCDEFGHIJ0123"}`)); e.Decision != Decline {
		t.Errorf("an answers-only server's answer with a key: %s (%s)", e.Decision, e.Reason)
	}

	_, err = NewJudge(Policy{Stance: "lax", Servers: []ServerStance{{Stance: StanceStrict}, {Name: "x", Stance: StanceAnswersOnly}, {Name: "y", Stance: "open"}}}, Options{})
	for _, want := range []string{`stance "lax"`, "needs the server's name", `server "x": answers-only needs`, `server "y": stance "open"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
}

// Keys in formats the check's own prefixes do not know are named by gitleaks' rules
// (hook/gitleaks): three of these (Linear, a Slack webhook URL, age) were let through
// before, and the others declined only as long random strings.
func TestGitleaksFormatsAreFound(t *testing.T) {
	j := testJudge(t)
	for id, value := range map[string]string{
		"linear-api-key":       "lin_api_" + strings.Repeat("ab12", 10),
		"doppler-api-token":    "dp.pt.q7m2k9x4v8n3p6r1t5w0y2z7b4c8d1f6g3h9j5l2s8u",
		"postman-api-token":    "PMAK-3f9a1c7e5b2d8046a9c1e7f3-b5d2a8c6e4f1907b3d5a2c8e6f4b1d9a7c",
		"databricks-api-token": "dapi3f9a1c7e5b2d8046a9c1e7f3b5d2a8c6",
		"slack-webhook-url":    "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
		"age-secret-key":       "AGE-SECRET-KEY-1" + strings.Repeat("QPZRY9X8GF", 5) + "2TVDW0S3",
	} {
		t.Run(id, func(t *testing.T) {
			e := j.Decide(answer("evil", "accept", `{"v":"`+value+`"}`))
			if e.Decision != Decline || !strings.Contains(e.Reason, "gitleaks rule "+id) {
				t.Fatalf("%s (%s), want a decline by gitleaks rule %s", e.Decision, e.Reason, id)
			}
		})
	}
	if len(formatRules()) < 200 {
		t.Errorf("%d gitleaks rules, want its whole default set (over 200)", len(formatRules()))
	}
}

// A key wrapped in base64 to hide its shape is named as what it wraps; base64 of plain
// text is not a secret (it may still be long and random enough to count as one).
func TestBase64WrappedKeysAreFound(t *testing.T) {
	for _, tt := range []struct{ value, want string }{
		{base64.StdEncoding.EncodeToString([]byte("ghp_0123456789abcdefghijABCDEFGHIJ0123")), "GitHub token (ghp_), in base64"},
		{base64.RawURLEncoding.EncodeToString([]byte("sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345")), "Anthropic key (sk-ant-), in base64"},
		{base64.StdEncoding.EncodeToString([]byte("the meeting is on Tuesday at noon")), ""},
	} {
		if got := secretShaped(tt.value); !strings.Contains(got, tt.want) || (tt.want == "" && strings.Contains(got, "base64")) {
			t.Errorf("%s: %q, want %q", tt.value, got, tt.want)
		}
	}
}

// Words that only look like secret words are a tested list of innocents; a policy adds
// secret words and innocent phrases of its own; every language but English is marked as
// not yet reviewed by native speakers.
func TestInnocentsUserWordsAndReview(t *testing.T) {
	var f struct {
		Review    map[string]string   `json:"review"`
		Innocents map[string][]string `json:"innocents"`
	}
	if err := json.Unmarshal(vocabularyJSON, &f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Review["others"], "not yet reviewed by native speakers") {
		t.Errorf("the vocabulary does not say its translations await review: %v", f.Review)
	}
	j := testJudge(t)
	for _, word := range f.Innocents["en"] {
		schema := `{"type":"object","properties":{"v":{"type":"string","title":"` + word + `"}}}`
		if e := j.Decide(formInput("tickets", word, schema)); e.Decision != Allow {
			t.Errorf("innocent %q refused: %s", word, e.Reason)
		}
	}
	for _, word := range strings.Fields("author passenger passport keyboard monkey secretary bypass") {
		if !slices.Contains(f.Innocents["en"], word) {
			t.Errorf("innocent %q is not in the list", word)
		}
	}

	own, err := NewJudge(Policy{SecretWords: []string{"vault phrase", "Tresorwort"}, InnocentPhrases: []string{"token ring"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	str := func(title string) string {
		return `{"type":"object","properties":{"v":{"type":"string","title":"` + title + `"}}}`
	}
	for title, want := range map[string]Decision{
		"Your vault phrase": Refuse, "Ihr TRESORWORT": Refuse, "Token ring network name": Allow, "Your access token": Refuse,
	} {
		if e := own.Decide(formInput("x", "Continue", str(title))); e.Decision != want {
			t.Errorf("%q with the policy's words: %s (%s), want %s", title, e.Decision, e.Reason, want)
		}
	}
	if _, err := NewJudge(Policy{SecretWords: []string{"  "}}, Options{}); err == nil || !strings.Contains(err.Error(), "has no word") {
		t.Errorf("an empty secret word: %v", err)
	}
}

// A URL that carries a password in its user part is a secret in an answer.
func TestURLsWithAPasswordAreFound(t *testing.T) {
	for value, want := range map[string]string{
		"postgres://app:s3cretPassw0rd@db.example.com:5432/prod": "a URL with a password",
		"see https://alice:hunter2@example.com/x":                "a URL with a password",
		"https://alice@example.com/x":                            "",
		"https://example.com/login?user=alice":                   "",
	} {
		if got := secretShaped(value); got != want {
			t.Errorf("%q: %q, want %q", value, got, want)
		}
	}
}

// A card number of 19 digits sent as a JSON number is judged as written, not as the float
// it would round to, also inside an object or a list.
func TestALongCardNumberAsANumberIsFound(t *testing.T) {
	const card = 6011000990131008123 // 19 digits, Luhn-valid; float64 rounds it to one that is not
	raw := strconv.FormatUint(card, 10)
	if !luhnCardNumber(raw) {
		t.Fatal("the test's card number does not pass Luhn")
	}
	// Inside an object it was rounded before (a float), and let through.
	for _, content := range []string{`{"v":` + raw + `}`, `{"v":{"card":` + raw + `}}`, `{"v":[` + raw + `]}`} {
		if e := testJudge(t).Decide(answer("evil", "accept", content)); e.Decision != Decline {
			t.Errorf("%s: %s (%s)", content, e.Decision, e.Reason)
		}
	}
}
