package templates

import (
	"context"

	"github.com/urlflow/urlflow/internal/brand"
)

type brandKey struct{}

// WithBrand returns ctx rendering pages with the deployment's brand b: its product name,
// logo, theme and support contact (nil: urlflow's own).
func WithBrand(ctx context.Context, b *brand.Brand) context.Context {
	return context.WithValue(ctx, brandKey{}, b)
}

// brandOf is the brand the pages of ctx are rendered with; nil is urlflow's own.
func brandOf(ctx context.Context) *brand.Brand {
	b, _ := ctx.Value(brandKey{}).(*brand.Brand)
	return b
}

// Product is the name the end users' pages give the product in the request of ctx: the
// deployment's brand name (WithBrand), else urlflow. The templates show it, and handlers
// pass it to messages that name the product ({{.Product}}).
func Product(ctx context.Context) string { return brandOf(ctx).Name() }
