package modelflags

import (
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/qwenc/qwenc/runtime/sampling"
)

// CheckSampling holds the sampling flags that were given to the rules of
// the chat's /set, in the flags' words.
func CheckSampling(c *cli.Context) error {
	for _, s := range sampling.Settings() {
		if !c.IsSet(s.Flag) {
			continue
		}
		v := flagValue(c, s)
		if _, err := s.Parse(v); err != nil {
			return fmt.Errorf("--%s %s: %v", s.Flag, v, err)
		}
	}
	return nil
}

// Sampling starts from the model's generation_config and applies the
// flags that were given (CheckSampling checked them against the
// parameter table); the seed is --seed's, or the clock's.
func Sampling(c *cli.Context, p sampling.Params) sampling.Params {
	for _, s := range sampling.Settings() {
		if c.IsSet(s.Flag) {
			v, _ := s.Parse(flagValue(c, s))
			s.Apply(&p, v)
		}
	}
	p.Seed = uint64(time.Now().UnixNano())
	if c.IsSet("seed") {
		p.Seed = c.Uint64("seed")
	}
	return p
}

// flagValue is the value of s's flag as text, for s.Parse: the chat's
// /set takes the same text.
func flagValue(c *cli.Context, s sampling.Setting) string {
	if s.Integer {
		return strconv.Itoa(c.Int(s.Flag))
	}
	return strconv.FormatFloat(c.Float64(s.Flag), 'g', -1, 64)
}
