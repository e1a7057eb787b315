package console

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "capstan.dev/capstan/api/core/v1beta2"
	"capstan.dev/capstan/internal/scheme"
)

// DefaultPort is the loopback port the management plane serves its console
// on unless told otherwise.
const DefaultPort = 8497

// Session is who the console acts as, shown by /api/session.
type Session struct {
	// User is the name the API server knows the credentials by; when empty
	// the server asks the API server (SelfSubjectReview).
	User string `json:"user"`
	// Server is the API server's URL.
	Server string `json:"server"`
	// Context is the kubeconfig context the credentials came from.
	Context string `json:"context"`
}

// Options configure a console Server.
type Options struct {
	// Config reaches the management cluster with the credentials every
	// read and write of the console is done with.
	Config  *rest.Config
	Session Session
	Log     logr.Logger
	// Coalesce is how long changes are gathered before a stream sends
	// them, so that a burst of changes goes out as one batch. Default 150ms.
	Coalesce time.Duration
	// WorkloadTimeout bounds reading a workload cluster's Nodes. Default 2s.
	WorkloadTimeout time.Duration
	// StartOnFirstUse starts the cache and its watches when a signed-in
	// browser first asks rather than with Run, so that a console nobody
	// opens (the plane's) costs the plane no memory and no watches.
	StartOnFirstUse bool
	// SessionLifetime is how long a browser stays signed in after it
	// exchanged the access token. Default DefaultSessionLifetime.
	SessionLifetime time.Duration
	// OnURL is called with the console's new URL each time its access
	// token was used and replaced, so that whoever showed the old URL can
	// show the new one. It must not block.
	OnURL func(url string)
}

// DefaultSessionLifetime is how long a browser session lasts: a working
// day. It ends then whatever the browser does; signing in again takes the
// console's current URL.
const DefaultSessionLifetime = 12 * time.Hour

// maxSessions bounds the sessions kept at once; signing in beyond it ends
// the oldest.
const maxSessions = 64

// browserSession is one signed-in browser (Server.sessions keeps them by
// the key its cookie holds): the token its changes must carry and when it
// ends.
type browserSession struct {
	csrfToken string
	expires   time.Time
}

// Server is a running console: the user's informer cache of the
// management cluster, the streams following it and the HTTP handlers.
type Server struct {
	opts    Options
	log     logr.Logger
	client  client.Client // uncached, for writes, Secrets and provider objects
	cache   cache.Cache
	hub     *hub
	nodes   *workloadClients
	session Session

	// accessToken is in the printed URL's fragment; it is exchanged, once,
	// by POST /api/login for a session cookie, and replaced. sessions are by
	// the key their cookie holds.
	authMu      sync.Mutex
	accessToken string
	sessions    map[string]browserSession
	cookieName  string
	port        int

	errMu      sync.Mutex
	watchErrs  map[string]error // by watched type: why its informer cannot list
	providerMu sync.Mutex
	watched    map[string]bool // provider kinds whose changes are followed
	runCtx     context.Context // Run's context, for informers started later
	startOnce  sync.Once
}

// kinds the console follows from the start; provider kinds are added as
// cluster views show them.
func followed() []client.Object {
	return []client.Object{&clusterv1.Cluster{}, &clusterv1.MachineDeployment{}, &clusterv1.MachineSet{},
		&clusterv1.MachinePool{}, &clusterv1.Machine{}, &clusterv1.MachineHealthCheck{}, &corev1.Event{}}
}

// New prepares a console; Listen and Run start it.
func New(opts Options) (*Server, error) {
	if opts.Config == nil {
		return nil, errors.New("console: Options.Config is required")
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = 150 * time.Millisecond
	}
	if opts.WorkloadTimeout <= 0 {
		opts.WorkloadTimeout = 2 * time.Second
	}
	if opts.SessionLifetime <= 0 {
		opts.SessionLifetime = DefaultSessionLifetime
	}
	s := &Server{opts: opts, log: opts.Log, session: opts.Session, watchErrs: map[string]error{}, watched: map[string]bool{},
		sessions: map[string]browserSession{}}
	sch := scheme.New()
	var err error
	if s.client, err = client.New(rest.CopyConfig(opts.Config), client.Options{Scheme: sch}); err != nil {
		return nil, fmt.Errorf("console: client for %s: %w", opts.Config.Host, err)
	}
	var informers cache.Cache
	informers, err = cache.New(rest.CopyConfig(opts.Config), cache.Options{
		Scheme: sch,
		// The fleet view needs no managed fields; dropping them roughly
		// halves what a cached Cluster costs.
		DefaultTransform:         cache.TransformStripManagedFields(),
		DefaultWatchErrorHandler: s.recordWatchError,
	})
	if err != nil {
		return nil, fmt.Errorf("console: cache: %w", err)
	}
	s.cache = startingCache{informers}
	s.hub = newHub()
	s.nodes = newWorkloadClients(opts.WorkloadTimeout)
	if s.accessToken, err = randomToken(); err != nil {
		return nil, err
	}
	return s, nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("console: random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// recordWatchError keeps why an informer cannot list or watch (most often
// RBAC), for the views to say instead of showing an empty fleet.
func (s *Server) recordWatchError(_ context.Context, r *toolscache.Reflector, err error) {
	s.errMu.Lock()
	s.watchErrs[r.TypeDescription()] = err
	s.errMu.Unlock()
	s.log.V(1).Info("Console watch failed", "type", r.TypeDescription(), "error", err.Error())
}

func (s *Server) watchError() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	var errs []error
	for _, err := range s.watchErrs {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Listen opens the console's port on 127.0.0.1 (0 picks a free one).
func (s *Server) Listen(port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	// Cookies do not tell ports apart: one name per port keeps two
	// consoles on this machine from overwriting each other's session.
	s.cookieName = "capstan_console_" + strconv.Itoa(s.port)
	return ln, nil
}

// URL is the address to open, with the current access token in its
// fragment (which a browser never sends to a server, nor keeps once the
// page removed it); it is a secret until used, and useless after.
func (s *Server) URL() string {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	return s.urlLocked()
}

func (s *Server) urlLocked() string {
	return fmt.Sprintf("http://127.0.0.1:%d/#token=%s", s.port, s.accessToken)
}

// Run starts the cache and serves ln until ctx ends.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.providerMu.Lock()
	s.runCtx = ctx
	s.providerMu.Unlock()
	if !s.opts.StartOnFirstUse {
		s.startWatching()
	}
	if s.session.User == "" {
		s.session.User = s.whoAmI(ctx)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	shutdown, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	_ = srv.Shutdown(shutdown)
	return nil
}

// startWatching starts the cache and the watches of the followed kinds,
// once, for as long as Run runs.
func (s *Server) startWatching() {
	s.startOnce.Do(func() {
		s.providerMu.Lock()
		ctx := s.runCtx
		s.providerMu.Unlock()
		for _, obj := range followed() {
			inf, err := s.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
			if err == nil {
				_, err = inf.AddEventHandler(s.changeHandler())
			}
			if err != nil {
				s.log.Error(err, "Console cannot watch a kind", "kind", fmt.Sprintf("%T", obj))
			}
		}
		go func() {
			if err := s.cache.Start(ctx); err != nil {
				s.log.Error(err, "Console cache stopped")
			}
		}()
	})
}

// whoAmI asks the API server whom the credentials belong to.
func (s *Server) whoAmI(ctx context.Context) string {
	review := &authenticationv1.SelfSubjectReview{}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.client.Create(ctx, review); err != nil {
		return ""
	}
	return review.Status.UserInfo.Username
}

// Handler serves the console; every request passes the Host check, /api
// needs the session cookie and changes need the CSRF token.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static := http.FileServerFS(assets())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("token") {
			writeError(w, http.StatusBadRequest, "the access token goes in the URL's fragment (#token=...), never its query: open the URL capstan printed")
			return
		}
		static.ServeHTTP(w, r)
	})
	mux.Handle("GET /", static)
	mux.HandleFunc("POST /api/login", s.login)
	api := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.authenticated(h)) }
	api("GET /api/session", s.handleSession)
	api("GET /api/clusters", s.handleClusters)
	api("GET /api/clusters/{namespace}/{name}", s.handleDetail)
	api("GET /api/watch", s.handleWatch)
	api("POST /api/clusters/{namespace}/{name}/scale", s.changing(s.handleScale))
	api("POST /api/clusters/{namespace}/{name}/pause", s.changing(s.handlePause))
	api("POST /api/clusters/{namespace}/{name}/rollout-restart", s.changing(s.handleRolloutRestart))
	api("POST /api/clusters/{namespace}/{name}/kubeconfig", s.changing(s.handleKubeconfig))
	noSuchAPI := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, r.Method+" "+r.URL.Path+": no such console API")
	}
	api("GET /api/clusters/{namespace}/{name}/{action}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "actions change state: send them with POST")
	})
	api("GET /api/", noSuchAPI)
	api("POST /api/", noSuchAPI)
	return s.loopbackOnly(mux)
}

// ContentSecurityPolicy lets the console's page load its own scripts,
// styles and images and talk to its own origin, and nothing else: no inline
// script or style, no other site, no framing. The page needs no more (its
// DOM is built with createElement and textContent, its one dynamic style is
// a CSS variable set through the CSSOM), so an injected markup string could
// run nothing even if one got through.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// loopbackOnly refuses requests whose Host is not a loopback address: a
// page on another site that rebinds its name to 127.0.0.1 sends its own
// name as Host and is turned away.
func (s *Server) loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLoopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, "the console answers only to 127.0.0.1, ::1 or localhost: Host "+strconv.Quote(r.Host)+" is refused")
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy)
		next.ServeHTTP(w, r)
	})
}

func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loginRequest is what the page posts with the token of its URL's
// fragment.
type loginRequest struct {
	Token string `json:"token"`
}

// login exchanges the access token for a session cookie, once: the token
// is replaced at once, so the URL it came in cannot sign in again (from
// browser history, a shared screen, a second browser). The request must be
// the console's own page's: same origin, JSON.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(w, r) {
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "POST /api/login takes JSON: {\"token\": \"...\"}")
		return
	}
	var req loginRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || req.Token == "" {
		writeError(w, http.StatusBadRequest, "POST /api/login takes JSON with the URL's token: {\"token\": \"...\"}")
		return
	}
	key, err := randomToken()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	csrf, err := randomToken()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	next, err := randomToken()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	now := time.Now()
	s.authMu.Lock()
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(s.accessToken)) != 1 {
		s.authMu.Unlock()
		writeError(w, http.StatusUnauthorized, "this console address was already used to sign in, or is wrong: each address signs in once; run capstan status (the plane's console) or see capstan ui's output for the current one")
		return
	}
	s.accessToken = next
	s.pruneLocked(now)
	s.sessions[key] = browserSession{csrfToken: csrf, expires: now.Add(s.opts.SessionLifetime)}
	url := s.urlLocked()
	s.authMu.Unlock()
	if s.opts.OnURL != nil {
		s.opts.OnURL(url)
	}
	s.log.Info("Console session started", "expires", now.Add(s.opts.SessionLifetime).UTC().Format(time.RFC3339))
	http.SetCookie(w, &http.Cookie{Name: s.cookieName, Value: key, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		MaxAge: int(s.opts.SessionLifetime / time.Second)})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]string{"expires": now.Add(s.opts.SessionLifetime).UTC().Format(time.RFC3339)})
}

// pruneLocked drops ended sessions and, beyond maxSessions, the oldest.
func (s *Server) pruneLocked(now time.Time) {
	for k, v := range s.sessions {
		if !now.Before(v.expires) {
			delete(s.sessions, k)
		}
	}
	for len(s.sessions) >= maxSessions {
		var oldest string
		for k, v := range s.sessions {
			if oldest == "" || v.expires.Before(s.sessions[oldest].expires) {
				oldest = k
			}
		}
		delete(s.sessions, oldest)
	}
}

// sessionOf is the live session r's cookie names.
func (s *Server) sessionOf(r *http.Request) (browserSession, bool) {
	c, err := r.Cookie(s.cookieName)
	if err != nil {
		return browserSession{}, false
	}
	s.authMu.Lock()
	defer s.authMu.Unlock()
	for k, v := range s.sessions {
		if subtle.ConstantTimeCompare([]byte(c.Value), []byte(k)) == 1 {
			if !time.Now().Before(v.expires) {
				delete(s.sessions, k)
				return browserSession{}, false
			}
			return v, true
		}
	}
	return browserSession{}, false
}

type sessionKey struct{}

func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.sessionOf(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "not signed in, or the session ended: open the console's current URL (capstan status prints the plane's)")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		s.startWatching()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
	})
}

// sameOrigin refuses a request another origin's page sent: its Origin, when
// sent, must be this console's (scheme, host and port), and so must the
// browser's Sec-Fetch-Site. Cookies do not tell ports apart; this does.
func (s *Server) sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" && origin != "http://"+r.Host {
		writeError(w, http.StatusForbidden, "requests from origin "+strconv.Quote(origin)+" are refused")
		return false
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		writeError(w, http.StatusForbidden, "requests from another site or origin ("+strconv.Quote(site)+") are refused")
		return false
	}
	if _, port, err := net.SplitHostPort(r.Host); s.port != 0 && (err != nil || port != strconv.Itoa(s.port)) {
		writeError(w, http.StatusForbidden, "Host "+strconv.Quote(r.Host)+" is not this console's port")
		return false
	}
	return true
}

// changing guards a state-changing handler: the session's CSRF token must
// be in the X-CSRF-Token header and the request must come from this
// console's origin.
func (s *Server) changing(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, _ := r.Context().Value(sessionKey{}).(browserSession)
		if sess.csrfToken == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("X-CSRF-Token")), []byte(sess.csrfToken)) != 1 {
			writeError(w, http.StatusForbidden, "missing or wrong X-CSRF-Token header: reload the console")
			return
		}
		if !s.sameOrigin(w, r) {
			return
		}
		next(w, r)
	}
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	sess, _ := r.Context().Value(sessionKey{}).(browserSession)
	writeJSON(w, http.StatusOK, map[string]string{"user": s.session.User, "server": s.session.Server,
		"context": s.session.Context, "csrfToken": sess.csrfToken, "expires": sess.expires.UTC().Format(time.RFC3339)})
}

// compressAbove is the size from which a JSON answer is sent gzipped to a
// browser that accepts it: the fleet of a thousand clusters shrinks about
// tenfold.
const compressAbove = 16 << 10

// writeLargeJSON is writeJSON for answers that may be large.
func writeLargeJSON(w http.ResponseWriter, r *http.Request, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("Vary", "Accept-Encoding")
	if len(data) < compressAbove || !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		_, _ = w.Write(data)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	_, _ = zw.Write(data)
	_ = zw.Close()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errorReply is what a refused or failed request answers.
type errorReply struct {
	Error string `json:"error"`
	Code  int    `json:"code"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorReply{Error: msg, Code: status})
}

// startingCache is the console's cache, whose reads wait out the moment
// between the first request starting the cache (startWatching, in a
// goroutine of its own) and the cache marking itself started, instead of
// failing that request with "the cache is not started". Once started, a
// read of a kind blocks until its informer has synced, as usual.
type startingCache struct{ cache.Cache }

func (c startingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return untilStarted(ctx, func() error { return c.Cache.Get(ctx, key, obj, opts...) })
}

func (c startingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return untilStarted(ctx, func() error { return c.Cache.List(ctx, list, opts...) })
}

// untilStarted reads again while the cache says it is not started: a
// goroutine about to start it has not run yet, so the wait is one or two
// turns of the scheduler, even on a loaded machine.
func untilStarted(ctx context.Context, read func() error) error {
	for {
		err := read()
		var notStarted *cache.ErrCacheNotStarted
		if !errors.As(err, &notStarted) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}
