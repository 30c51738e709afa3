package cas

import "testing"

// Known BLAKE3-256 answers pin the algorithm: changing Sum renames every
// stored object, so it must never happen by accident.
func TestSumKnownAnswers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"},
		{"abc", "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"},
	} {
		if got := Sum([]byte(tc.in)).String(); got != tc.want {
			t.Errorf("Sum(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
