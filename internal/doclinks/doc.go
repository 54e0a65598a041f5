// Package doclinks holds the test that keeps urlflow's documentation navigable: every
// Markdown link in README.md, docs/*.md, docs/*/*.md and the READMEs under e2e/ points to a
// file that exists and, when it has an #anchor, to a heading of that file (by GitHub's
// anchor rule); absolute http(s) links must parse (they are never fetched); and every guide
// under docs/ is linked from README.md, the front page.
//
// It has no code outside its test: run it with go test ./internal/doclinks/.
package doclinks
