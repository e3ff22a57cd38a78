/**
 * The HTTP client every source sends through (`http.ts`: timeouts, retries with backoff, redirects
 * kept to allowed origins, bodies read within byte bounds), the pacer that keeps a process's
 * requests to each host at a pace the host takes (`host_pacer.ts`), and the headers sent with them
 * (`request_headers.ts`: the user agent, and credentials kept to their own host).
 *
 * @module
 */
export {
  BODY_BYTES_IN_FLIGHT,
  type HttpAnswer,
  HttpClient,
  type HttpOptions,
  largeAnswers,
  networkCause,
  TooLargeError,
} from "./http.ts";
export {
  type HostPace,
  type PaceOutcome,
  Pacer,
  type PacerOptions,
  type PaceState,
} from "./host_pacer.ts";
export { parseHeader, type RequestHeader, USER_AGENT } from "./request_headers.ts";
