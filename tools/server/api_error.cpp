#include "tools/server/api_error.h"

namespace kiln::server {

std::string error_type(int status) {
    switch (status) {
        case 400: return "invalid_request_error";
        case 401: return "authentication_error";
        case 404: return "not_found_error";
        case 413: return "invalid_request_error";
        case 501: return "not_supported_error";
        case 503: return "unavailable_error";
        default: return "server_error";
    }
}

nlohmann::json error_json(int status, const std::string& message) {
    return {{"error", {{"message", message}, {"type", error_type(status)}, {"code", status}}}};
}

}  // namespace kiln::server
