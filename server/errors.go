package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// apiError is an error in OpenAI's JSON shape, with its HTTP status.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// RetryAfter, in seconds, for a refusal that passes (a full queue).
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	return e
}

func writeError(w http.ResponseWriter, err error) {
	var e *apiError
	if !errors.As(err, &e) {
		e = &apiError{Status: http.StatusInternalServerError, Type: "internal_error", Message: err.Error()}
	}
	code := http.StatusText(e.Status)
	if e.Code == nil {
		e.Code = &code
	}
	w.Header().Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(map[string]*apiError{"error": e})
}

// decodeBody reads a JSON request body into v, naming the field of a type
// error and answering 413 for a body over the limit.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		var typeErr *json.UnmarshalTypeError
		var syntax *json.SyntaxError
		switch {
		case errors.As(err, &tooBig):
			return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Message: fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit)}
		case errors.As(err, &typeErr):
			field := strings.TrimPrefix(strings.TrimPrefix(typeErr.Field, "samplingFields."), "structuredFields.")
			return badRequest(field, "field %q: expected %v, got JSON %s", field, typeErr.Type, typeErr.Value)
		case errors.As(err, &syntax):
			return badRequest("", "malformed JSON at byte %d: %v", syntax.Offset, err)
		}
		return badRequest("", "malformed JSON: %v", err)
	}
	return nil
}
