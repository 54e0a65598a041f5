// Package spelling finds the word someone probably meant: the "did you mean" of the
// command line, the configuration file's unknown keys and the docs' broken anchors.
package spelling

// Distance is the Levenshtein distance between a and b, in bytes (the names it compares
// are ASCII).
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Nearest returns the candidate nearest to word, fewer than within edits away (the first
// in candidates' order on a tie), or "" when none is.
func Nearest(word string, candidates []string, within int) string {
	best, bestDistance := "", within
	for _, c := range candidates {
		if d := Distance(word, c); d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}
