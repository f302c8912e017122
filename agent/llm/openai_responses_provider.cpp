// The OpenAI Responses API (kind: openai_responses), which some OpenAI
// models are served by alone (https://platform.openai.com/docs/api-reference/responses).
//
// The conversation goes in `input` (the system prompt in `instructions`),
// max_tokens as max_output_tokens (reasoning counts inside it, as for Chat
// Completions), reasoning_effort as reasoning.effort with the reasoning
// summary asked for, which is stored as the reasoning. Output items of
// type "reasoning" carry summary_text parts, items of type "message" carry
// output_text and refusal parts; status "incomplete" says why in
// incomplete_details.reason. Streaming events: response.output_text.delta,
// response.reasoning_summary_text.delta, response.refusal.delta, then
// response.completed (or .incomplete / .failed) with the whole response.
#include <memory>

#include "agent/llm/openai_base.h"
#include "agent/llm/provider_factories.h"

namespace kloop {
namespace {

class OpenAiResponsesProvider : public OpenAiBase {
 public:
  using OpenAiBase::OpenAiBase;

 protected:
  std::string endpoint_url() const override { return base_url() + "/responses"; }

  nlohmann::json request_body(const GenerationRequest& request) const override {
    const ProviderConfig& c = config();
    nlohmann::json input = nlohmann::json::array();
    for (const auto& m : request.messages) input.push_back({{"role", m.role}, {"content", m.content}});
    nlohmann::json body = {{"model", c.model}, {"input", input}, {"store", false}};
    if (!request.system.empty()) body["instructions"] = request.system;
    if (c.max_tokens) body["max_output_tokens"] = *c.max_tokens;
    if (c.temperature) body["temperature"] = *c.temperature;
    if (c.top_p) body["top_p"] = *c.top_p;
    if (c.reasoning_effort) body["reasoning"] = {{"effort", *c.reasoning_effort}, {"summary", "auto"}};
    return body;
  }

  void read_response(const nlohmann::json& body, GenerationResult& out) const override {
    if (!body.contains("output") || !body["output"].is_array()) {
      throw MalformedResponse("no output in the response: " + server_error_message(body.dump()));
    }
    for (const auto& item : body["output"]) {
      const std::string type = json_text(item, "type");
      if (type == "reasoning") {
        for (const auto& part : item.value("summary", nlohmann::json::array())) {
          if (!out.reasoning.empty()) out.reasoning += "\n\n";
          out.reasoning += json_text(part, "text");
        }
      } else if (type == "message") {
        for (const auto& part : item.value("content", nlohmann::json::array())) {
          const std::string kind = json_text(part, "type");
          if (kind == "output_text") out.text += json_text(part, "text");
          if (kind == "refusal") out.refusal += json_text(part, "refusal");
        }
      }
    }
    const std::string status = json_text(body, "status");
    const std::string why = body.contains("incomplete_details") ? json_text(body["incomplete_details"], "reason") : "";
    if (!out.refusal.empty() || why == "content_filter") {
      out.finish_reason = "content_filter";
    } else if (status == "completed" || status.empty()) {
      out.finish_reason = "stop";
    } else if (why == "max_output_tokens") {
      out.finish_reason = "length";
    } else {
      out.finish_reason = "other:" + status + (why.empty() ? "" : ":" + why);
    }
    if (body.contains("usage") && body["usage"].is_object()) {
      const auto& usage = body["usage"];
      out.input_tokens = json_count(usage, "input_tokens");
      out.output_tokens = json_count(usage, "output_tokens");
      if (usage.contains("input_tokens_details")) {
        out.cached_input_tokens = json_count(usage["input_tokens_details"], "cached_tokens");
      }
      if (usage.contains("output_tokens_details")) {
        out.reasoning_tokens = json_count(usage["output_tokens_details"], "reasoning_tokens");
      }
    }
  }

  void ask_for_stream(nlohmann::json& body, HttpRequest&) const override { body["stream"] = true; }

  // The answer ends with response.completed or response.incomplete (the
  // whole response); response.failed and an `error` event are failures.
  nlohmann::json assemble_stream(const std::vector<SseEvent>& events, StreamEnd& end) const override {
    std::string text, reasoning, refusal;
    for (const auto& e : events) {
      const auto d = nlohmann::json::parse(e.data, nullptr, false);
      if (!d.is_object()) continue;
      const std::string type = e.event.empty() ? json_text(d, "type") : e.event;
      if (type == "response.completed" || type == "response.incomplete") {
        if (d.contains("response") && d["response"].is_object()) {
          end.complete = true;
          return d["response"];
        }
      } else if (type == "response.failed" || type == "error") {
        end.error = d.contains("response") && d["response"].contains("error")
                        ? server_error_message(d["response"].dump())
                        : server_error_message(e.data);
        if (end.error.empty()) end.error = type;
      } else if (type == "response.output_text.delta") {
        text += json_text(d, "delta");
      } else if (type == "response.reasoning_summary_text.delta") {
        reasoning += json_text(d, "delta");
      } else if (type == "response.refusal.delta") {
        refusal += json_text(d, "delta");
      }
    }
    // No final event (the stream broke): what the deltas said.
    if (text.empty() && reasoning.empty() && refusal.empty()) {
      throw MalformedResponse("a stream without output" + (end.error.empty() ? "" : ": " + end.error));
    }
    nlohmann::json content = nlohmann::json::array({{{"type", "output_text"}, {"text", text}}});
    if (!refusal.empty()) content.push_back({{"type", "refusal"}, {"refusal", refusal}});
    return {{"output", nlohmann::json::array({{{"type", "reasoning"},
                                                {"summary", nlohmann::json::array({{{"type", "summary_text"},
                                                                                    {"text", reasoning}}})}},
                                               {{"type", "message"}, {"content", content}}})},
            {"status", "incomplete"},
            {"streamed", true}};
  }

  // Deltas of text, reasoning or a refusal, and the events that end the
  // answer; response.created, .in_progress and output items' bookkeeping
  // carry nothing generated.
  bool carries_tokens(const SseEvent& e) const override {
    std::string type = e.event;
    if (type.empty()) type = json_text(nlohmann::json::parse(e.data, nullptr, false), "type");
    const std::string delta = ".delta";
    const bool is_delta = type.size() > delta.size() && type.compare(type.size() - delta.size(), delta.size(), delta) == 0;
    return is_delta || type == "response.completed" || type == "response.incomplete" || type == "response.failed" ||
           type == "error";
  }
};

}  // namespace

std::unique_ptr<LlmProvider> make_openai_responses_provider(const ProviderConfig& config,
                                                            const ProviderHooks& hooks) {
  return std::make_unique<OpenAiResponsesProvider>(config, hooks);
}

}  // namespace kloop
