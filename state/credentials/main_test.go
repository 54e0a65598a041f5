package credentials

import (
	"os"
	"testing"

	"github.com/urlflow/urlflow/internal/redistest"
)

func TestMain(m *testing.M) {
	redistest.SetParallel(8)
	os.Exit(m.Run())
}
