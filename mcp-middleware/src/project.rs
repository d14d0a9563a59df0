//! What a model knows about the project it runs in: its prompts and servers.
//!
//! The embedding code or `mcpctl` (from its project store) hands one to the proxy; hooks read it
//! with [`Context::project`](crate::Context::project).

/// A project: a name, the prompts it offers models such as `gate`, and its servers' names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Project {
    /// The project's name.
    pub name: String,
    /// Its prompts.
    pub prompts: Vec<ProjectPrompt>,
    /// The names of its servers.
    pub servers: Vec<String>,
    /// When several servers are served as one ([`ServerSet`](crate::upstream::ServerSet)): the
    /// separator of the namespaced names (`server{separator}tool`), filled in by
    /// [`Proxy::project`](crate::Proxy::project). `None` when one server is served as it is.
    pub separator: Option<String>,
    /// The OpenAI-compatible endpoint [`Context::llm`](crate::Context::llm) uses when the
    /// client cannot sample.
    pub llm: Option<crate::llm::LlmEndpoint>,
}

impl Project {
    /// An empty project called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// The same project with an LLM endpoint for [`Context::llm`](crate::Context::llm).
    ///
    /// ```
    /// use mcp_middleware::Project;
    /// use mcp_middleware::llm::LlmEndpoint;
    ///
    /// let project = Project::new("docs")
    ///     .llm(LlmEndpoint::new("http://127.0.0.1:11434/v1", "llama3.2"));
    /// assert_eq!(project.llm.map(|llm| llm.model).as_deref(), Some("llama3.2"));
    /// ```
    pub fn llm(mut self, endpoint: crate::llm::LlmEndpoint) -> Self {
        self.llm = Some(endpoint);
        self
    }

    /// Adds a prompt.
    pub fn prompt(mut self, prompt: ProjectPrompt) -> Self {
        self.prompts.push(prompt);
        self
    }
}

/// A prompt of a project: a name, tags, and the text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProjectPrompt {
    /// Its name.
    pub name: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its text.
    pub content: String,
}

impl ProjectPrompt {
    /// A prompt called `name` with `content`.
    pub fn new(name: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            tags: Vec::new(),
            content: content.into(),
        }
    }

    /// The same prompt with `tags`.
    pub fn tags<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tags: I) -> Self {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }
}
