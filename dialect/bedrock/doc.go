// Package bedrock translates between OpenAI's Chat Completions, the one
// dialect Weir's gateway speaks inside, and Amazon Bedrock's Converse and
// ConverseStream APIs, whose wire types are the AWS SDK for Go's
// (service/bedrockruntime): a Chat Completions request becomes a
// ConverseInput (Decode), a Converse answer becomes a chat.completion
// (Answer), and a ConverseStream's events become chat.completion.chunk
// events one by one (Stream). It does no HTTP: provider's bedrock adapter
// sends what it makes.
//
// What is translated, what is dropped and what is refused is listed in
// docs/dialects/bedrock.md.
package bedrock
