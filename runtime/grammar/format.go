package grammar

// A format is a pattern (and a length it keeps within). The texts are
// narrower than their RFCs allow, so that every one is valid to any
// validator: years from 0001, upper-case T and Z, February up to the
// 28th, no leap second; URIs absolute with an authority; e-mail
// addresses and host names of letters, digits and hyphens, at most 64
// and 63 characters (so no label or local part is too long); durations
// as RFC 3339's grammar, which validators accept and more.
type format struct {
	pattern string
	maxLen  int // -1: no bound
}

const (
	datePattern = `(000[1-9]|00[1-9]\d|0[1-9]\d\d|[1-9]\d\d\d)-(0[13578]-(0[1-9]|[12]\d|3[01])|1[02]-(0[1-9]|[12]\d|3[01])|(0[469]|11)-(0[1-9]|[12]\d|30)|02-(0[1-9]|1\d|2[0-8]))`
	timePattern = `([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+\-]([01]\d|2[0-3]):[0-5]\d)`
	label       = `[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?`
	hexGroup    = `[0-9a-fA-F]{1,4}`
	uriChar     = `([a-zA-Z0-9._~!$&'()*+,;=:@\-]|%[0-9a-fA-F]{2})`
	durTime     = `T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S)`
)

var formats = map[string]format{
	"date":      {`^` + datePattern + `$`, -1},
	"time":      {`^` + timePattern + `$`, -1},
	"date-time": {`^` + datePattern + `T` + timePattern + `$`, -1},
	"uuid":      {`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, -1},
	"uri":       {`^[a-zA-Z][a-zA-Z0-9+.\-]{0,15}://[a-zA-Z0-9._~\-]+(:\d{1,5})?(/` + uriChar + `*)*(\?(` + uriChar + `|[/?])*)?(#(` + uriChar + `|[/?])*)?$`, -1},
	"email":     {`^[a-zA-Z0-9!#$%&'*+/=?^_{|}~\-]+(\.[a-zA-Z0-9!#$%&'*+/=?^_{|}~\-]+)*@(` + label + `\.)+[a-zA-Z][a-zA-Z]+$`, 64},
	"hostname":  {`^` + label + `(\.` + label + `)*$`, 63},
	"ipv4":      {`^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$`, -1},
	"ipv6": {`^((` + hexGroup + `:){7}` + hexGroup + `|(` + hexGroup + `:){1,7}:|(` + hexGroup + `:){1,6}:` + hexGroup +
		`|(` + hexGroup + `:){1,5}(:` + hexGroup + `){1,2}|(` + hexGroup + `:){1,4}(:` + hexGroup + `){1,3}|(` + hexGroup + `:){1,3}(:` + hexGroup + `){1,4}` +
		`|(` + hexGroup + `:){1,2}(:` + hexGroup + `){1,5}|` + hexGroup + `:(:` + hexGroup + `){1,6}|:((:` + hexGroup + `){1,7}|:))$`, -1},
	"duration":     {`^P(\d+W|(\d+Y(\d+M(\d+D)?)?|\d+M(\d+D)?|\d+D)(` + durTime + `)?|` + durTime + `)$`, -1},
	"json-pointer": {`^(/([^~/]|~[01])*)*$`, -1},
	// zod's names for contentEncoding's.
	"base64":    {base64Pattern, -1},
	"base64url": {base64urlPattern, -1},
}

// formatAliases are formats whose language holds another's: that one's
// texts are valid for them.
var formatAliases = map[string]string{
	"uri-reference": "uri", "iri": "uri", "iri-reference": "uri",
	"idn-email": "email", "idn-hostname": "hostname",
}

// annotationFormats constrain nothing a string's text could be checked
// for: pydantic's and OpenAPI's descriptions of what a string is for, and
// number formats met on strings.
var annotationFormats = []string{"password", "binary", "textarea", "path", "file-path", "directory-path",
	"int32", "int64", "float", "double", "multi-line", "markdown", "color"}

// base64 is contentEncoding base64's text (RFC 4648, padded), and
// base64url its URL-safe alphabet, unpadded as zod writes it.
const (
	base64Pattern    = `^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`
	base64urlPattern = `^([A-Za-z0-9_\-]{4})*([A-Za-z0-9_\-]{2,3})?$`
)

// formatOf is a format's definition, its aliases' included.
func formatOf(name string) (format, bool) {
	if to, ok := formatAliases[name]; ok {
		name = to
	}
	f, ok := formats[name]
	return f, ok
}
