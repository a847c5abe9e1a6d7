package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// The media types of a qwenc model. ArtifactType names the artifact in
// the manifest (what `oras discover` and registries' UIs show); the layer
// is a .qbin file whose own header carries its format version.
const (
	ArtifactType   = "application/vnd.qwenc.qbin.v1"
	LayerMediaType = "application/vnd.qwenc.qbin.layer.v1"
)

// Manifest annotations: the file's name (the key ORAS and other artifact
// tools use for it), then what `qwenc inspect` says of the model, so a
// registry's listing tells models apart without pulling them. The keys
// are in reverse-domain notation, as the image spec asks.
const (
	AnnotationTitle         = "org.opencontainers.image.title"
	AnnotationArchitecture  = "io.github.qwenc.qbin.architecture"
	AnnotationWeightType    = "io.github.qwenc.qbin.weight-type"
	AnnotationParameters    = "io.github.qwenc.qbin.parameters"
	AnnotationContext       = "io.github.qwenc.qbin.context"
	AnnotationFormatVersion = "io.github.qwenc.qbin.format-version"
)

// Scheme prefixes a registry reference where a file path could also be
// given (qwenrun's MODEL argument).
const Scheme = "oci://"

// IsRef reports whether s names a model in a registry rather than a file.
func IsRef(s string) bool { return strings.HasPrefix(s, Scheme) }

// Options are a push's or a pull's connection to the registry.
type Options struct {
	// Insecure allows plain HTTP to a registry that is not on this
	// machine. Without it only localhost and loopback addresses may be
	// spoken to without TLS: go-containerregistry would also fall back
	// to HTTP for private (RFC 1918) addresses, where a network attacker
	// could serve a model of their choosing under a trusted name.
	Insecure bool
	// Keychain finds the credentials for a registry; nil is docker
	// login's: ~/.docker/config.json ($DOCKER_CONFIG) and the credential
	// helpers it names.
	Keychain authn.Keychain
	// Transport carries the HTTP requests; nil is go-containerregistry's
	// default (proxies from the environment, its timeouts).
	Transport http.RoundTripper
	// Progress, if not nil, gets a line for each step of a pull or push.
	Progress io.Writer
	// StallTimeout gives up a request that receives nothing for that
	// long: a GET or HEAD with no answer (made again, as a timeout), a
	// blob download gone silent mid-way (resumed); 0 is 30 seconds.
	StallTimeout time.Duration

	anonymous bool // no credentials were found for the registry
}

func (o *Options) logf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// parseRef parses REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:HEX, with or
// without oci://. A name without a registry is Docker Hub's, as for
// `docker pull`.
func (o *Options) parseRef(s string) (name.Reference, error) {
	var opts []name.Option
	if o.Insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(strings.TrimPrefix(s, Scheme), opts...)
	if err != nil {
		return nil, fmt.Errorf("%q: not a registry reference (want REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:DIGEST): %w", s, err)
	}
	// go-containerregistry falls back to plain HTTP for 127.0.0.1 and
	// localhost:PORT only; the policy allows every loopback address, so
	// those are parsed again, as insecure, to be tried over HTTP too.
	if !o.Insecure && ref.Context().Scheme() == "https" && isLocal(hostOf(ref.Context().RegistryStr())) {
		return name.ParseReference(strings.TrimPrefix(s, Scheme), name.Insecure)
	}
	return ref, nil
}

// hostOf is a registry's host, without its port.
func hostOf(registry string) string {
	u, err := url.Parse("//" + registry)
	if err != nil {
		return registry
	}
	return u.Hostname()
}

// transport returns an authenticated transport for ref's repository
// with the given scopes: the registry pinged, its token fetched once,
// and every request made through the plain-HTTP policy.
func (o *Options) transport(ctx context.Context, ref name.Reference, scopes ...string) (http.RoundTripper, error) {
	repo := ref.Context()
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	auth, err := authn.Resolve(ctx, kc, repo)
	if err != nil {
		return nil, fmt.Errorf("%s: credentials for %s: %w", ref, repo.RegistryStr(), err)
	}
	o.anonymous = auth == authn.Anonymous
	base := o.Transport
	if base == nil {
		base = remote.DefaultTransport
	}
	stall := o.StallTimeout
	if stall <= 0 {
		stall = defaultStall
	}
	policy := &answerTimeout{inner: &plainHTTPPolicy{inner: base, insecure: o.Insecure}, d: stall}
	retrying := transport.NewRetry(policy, transport.WithRetryBackoff(retryBackoff),
		transport.WithRetryPredicate(retryable), transport.WithRetryStatusCodes(retryStatus...))
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, retrying, scopes)
	if err != nil {
		return nil, o.explain(ref.String(), repo.RegistryStr(), err)
	}
	return rt, nil
}

// explain is err, which a request about what (a reference or a blob) met
// at the registry reg, prefixed with what, and with what the registry's
// answer means for the user where its status says: log in, log in
// again, nothing there, try later.
func (o *Options) explain(what, reg string, err error) error {
	var te *transport.Error
	hint := ""
	if errors.As(err, &te) {
		switch code := te.StatusCode; {
		case code == http.StatusUnauthorized && o.anonymous:
			hint = fmt.Sprintf("authentication required, and there are no credentials for %s (docker login %s)", reg, reg)
		case code == http.StatusUnauthorized:
			hint = fmt.Sprintf("the credentials for %s were refused, or give no access to this repository (docker login %s)", reg, reg)
		case code == http.StatusForbidden && o.anonymous:
			hint = fmt.Sprintf("access denied without credentials (docker login %s)", reg)
		case code == http.StatusForbidden:
			hint = fmt.Sprintf("access denied to the credentials for %s", reg)
		case code == http.StatusNotFound:
			hint = "not found at the registry"
		case code == http.StatusTooManyRequests:
			hint = fmt.Sprintf("%s's rate limit, still hit after retries: try again later", reg)
		case code >= 500:
			hint = fmt.Sprintf("%s failed (%d %s), still after retries: try again later", reg, code, http.StatusText(code))
		}
	}
	if hint == "" {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %s: %w", what, hint, err)
}

// retryBackoff paces the retries of a request the registry answered
// with 408, 429 or a 5xx, or that a connection reset ended, as
// go-containerregistry's own remote calls do (1 s, then 3 s): this
// package hands them a transport of its own, which they take as is,
// without the retrying one they would otherwise wrap around it. It also
// paces the resumptions of a blob download cut off mid-way.
var retryBackoff = transport.Backoff{Duration: time.Second, Factor: 3, Jitter: 0.1, Steps: 3}

// retryStatus are the answers a request is made again for: a timeout,
// a rate limit, a registry or its gateway down for a moment.
var retryStatus = []int{
	http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
	http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout,
}

// retryable reports whether a request that failed with err is made
// again: a registry's temporary error, or a connection that broke.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errPlainHTTP) {
		return false
	}
	var t interface{ Temporary() bool }
	return (errors.As(err, &t) && t.Temporary()) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// answerTimeout gives up a GET or HEAD that has no answer within d: a
// registry that takes the connection and says nothing would hold a pull
// for good. Other requests may wait long for theirs (a registry moves a
// whole uploaded blob into place before it answers the PUT).
type answerTimeout struct {
	inner http.RoundTripper
	d     time.Duration
}

// errNoAnswer is a request answerTimeout gave up: a timeout, made again.
type errNoAnswer struct{ d time.Duration }

func (e errNoAnswer) Error() string   { return fmt.Sprintf("no answer in %v", e.d) }
func (e errNoAnswer) Timeout() bool   { return true }
func (e errNoAnswer) Temporary() bool { return true }

func (a *answerTimeout) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return a.inner.RoundTrip(r)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	timer := time.AfterFunc(a.d, func() { cancel(errNoAnswer{a.d}) })
	resp, err := a.inner.RoundTrip(r.WithContext(ctx))
	timer.Stop()
	if err != nil {
		cause := context.Cause(ctx)
		cancel(nil)
		var na errNoAnswer
		if errors.As(cause, &na) {
			return nil, na
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a request's context once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}

// errPlainHTTP is returned for a plain-HTTP request the policy refuses.
var errPlainHTTP = errors.New("plain HTTP refused: only localhost is spoken to without TLS unless --insecure is given")

// plainHTTPPolicy refuses plain-HTTP requests to hosts that are not this
// machine unless insecure is set. It sits below go-containerregistry's
// own transports, so it sees the scheme they finally chose, and also
// holds for a token server or a blob store a registry redirects to.
type plainHTTPPolicy struct {
	inner    http.RoundTripper
	insecure bool
}

func (p *plainHTTPPolicy) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" && !p.insecure && !isLocal(r.URL.Hostname()) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("%s: %w", r.URL.Host, errPlainHTTP)
	}
	return p.inner.RoundTrip(r)
}

// isLocal reports whether host is this machine: localhost or a loopback
// address.
func isLocal(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ModelName is the name a server gives the model ref in its answers, as
// it gives a file's base name: the repository's last element
// (qwen3-0.6b for oci://REGISTRY/models/qwen3-0.6b:q8); "" if ref does
// not parse.
func ModelName(ref string) string {
	r, err := name.ParseReference(strings.TrimPrefix(ref, Scheme))
	if err != nil {
		return ""
	}
	repo := r.Context().RepositoryStr()
	return repo[strings.LastIndexByte(repo, '/')+1:]
}
