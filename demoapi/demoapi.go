// Package demoapi is the small third-party API that `urlflow dev` serves under /demo/api,
// so that set_secret followed by call_api works offline and shows what a real integration
// looks like. It stands in for a provider: it knows nothing of urlflow and only checks the
// key it is given.
//
// A valid demo key is "demo_" followed by at least 16 ASCII letters or digits, sent as
// "Authorization: Bearer KEY", and not revoked: the API treats every key that starts with
// "demo_revoked" as revoked, so that a key can pass urlflow's form and still be refused.
// Every endpoint answers 401 to a key that is not valid.
package demoapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
)

// Prefix is where urlflow dev mounts the API.
const Prefix = "/demo/api"

var keyPattern = regexp.MustCompile(`^demo_[A-Za-z0-9]{16,}$`)

// RevokedPrefix starts every revoked demo key.
const RevokedPrefix = "demo_revoked"

// ValidKey reports whether key is a valid demo key.
func ValidKey(key string) bool { return keyPattern.MatchString(key) && !Revoked(key) }

// Revoked reports whether key is a revoked demo key.
func Revoked(key string) bool { return strings.HasPrefix(key, RevokedPrefix) }

// Account names the demo account of key without revealing the key: "demo-" and 8 hex
// digits of its SHA-256.
func Account(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "demo-" + hex.EncodeToString(sum[:4])
}

// Handler returns the API, to be mounted at Prefix:
//
//	GET  /whoami   {"account": "demo-…"} for a valid key
//	GET  /echo     the request as the API saw it: method, path, query and headers
//	POST /echo     the same, with the body
//	GET  /workspaces/{workspace}/whoami   {"account": "demo-…", "workspace": …}, or 404
//	               for a workspace whose name starts with "missing": an address made of
//	               what the user entered (a slot's api.parameters)
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"/whoami", authorized(func(w http.ResponseWriter, r *http.Request, account string) {
		writeJSON(w, http.StatusOK, map[string]string{"account": account})
	}))
	mux.HandleFunc("GET "+Prefix+"/workspaces/{workspace}/whoami", authorized(func(w http.ResponseWriter, r *http.Request, account string) {
		workspace := r.PathValue("workspace")
		if strings.HasPrefix(workspace, "missing") {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such workspace"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"account": account, "workspace": workspace})
	}))
	echo := authorized(func(w http.ResponseWriter, r *http.Request, account string) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unreadable body"})
			return
		}
		headers := map[string]string{}
		for name, values := range r.Header {
			headers[name] = strings.Join(values, ", ")
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"account": account, "method": r.Method, "path": r.URL.Path,
			"query": r.URL.Query(), "headers": headers, "body": string(body),
		})
	})
	mux.HandleFunc("GET "+Prefix+"/echo", echo)
	mux.HandleFunc("POST "+Prefix+"/echo", echo)
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such endpoint; try GET /whoami or /echo"})
	})
	return mux
}

// authorized checks the bearer key and passes its account on.
func authorized(next func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !ValidKey(key) {
			msg := "invalid demo key: send Authorization: Bearer demo_ followed by 16 or more letters or digits"
			if Revoked(key) {
				msg = "this demo key is revoked"
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="urlflow demo"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": msg})
			return
		}
		account := Account(key)
		w.Header().Set("X-Demo-Account", account)
		next(w, r, account)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
