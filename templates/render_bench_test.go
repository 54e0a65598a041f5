package templates_test

import (
	"context"
	"io"
	"testing"

	"github.com/urlflow/urlflow/internal/locale"
)

// BenchmarkRenderFlowPages renders the pages of a secret flow (the consent page, the form,
// the confirmation) as the gallery has them, in English and in German: the rendering part
// of a page request's CPU.
func BenchmarkRenderFlowPages(b *testing.B) {
	pages := map[string]bool{"consent": true, "secret-form": true, "done": true}
	for _, lang := range []string{"en", "de"} {
		b.Run(lang, func(b *testing.B) {
			ctx := locale.With(context.Background(), locale.Default().Negotiate(lang, ""))
			var flow []sample
			for _, s := range samples() {
				if pages[s.name] {
					flow = append(flow, s)
				}
			}
			if len(flow) != len(pages) {
				b.Fatalf("the gallery has %d of the flow's %d pages", len(flow), len(pages))
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range flow {
					if err := s.page.Render(ctx, io.Discard); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
