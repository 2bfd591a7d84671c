// Package plural writes counts with their nouns: "1 instance", "4
// instances", for the messages of blis and calibrate.
package plural

import "strconv"

// Of is n and noun, the noun with an s unless n is 1 (or -1).
func Of[N ~int | ~int32 | ~int64](n N, noun string) string {
	s := strconv.FormatInt(int64(n), 10) + " " + noun
	if n != 1 && n != -1 {
		s += "s"
	}
	return s
}

// Verb is Of followed by the verb that agrees with it: "1 request was",
// "2 requests were".
func Verb[N ~int | ~int32 | ~int64](n N, noun, one, many string) string {
	if n == 1 || n == -1 {
		return Of(n, noun) + " " + one
	}
	return Of(n, noun) + " " + many
}
