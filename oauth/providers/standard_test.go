package providers

import (
	"net/http"
	"testing"
)

func TestPassingTroubleIsNotARefusal(t *testing.T) {
	for status, want := range map[int]bool{
		http.StatusBadRequest: true, http.StatusUnauthorized: true, http.StatusForbidden: true,
		http.StatusTooManyRequests: false, http.StatusRequestTimeout: false,
		http.StatusInternalServerError: false, http.StatusServiceUnavailable: false, http.StatusOK: false,
	} {
		if got := refusal(status); got != want {
			t.Errorf("refusal(%d) = %v, want %v", status, got, want)
		}
	}
}
